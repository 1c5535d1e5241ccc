/* window.cl — IM2COL, COL2IM, POOL2D_FWD and POOL2D_BWD (backend.h's window ops), grid-stride
 * over their outputs.
 *
 * Every kernel takes the geometry as WIN_GEOM: n images of C planes of H x W elements, x_batch
 * (xb) elements apart, kh x kw windows of stride (sh, sw), padding (ph, pw) and dilation
 * (dh, dw), out_h x out_w (oh, ow) of them per plane. IM2COL gives each cols element one work
 * item; a copy between equal dtypes moves the bits, otherwise each element is widened
 * exactly and rounded once to nearest even, padding taps store 0. POOL2D_FWD gives each y
 * element one work item walking its window's in-plane taps in row-major order. COL2IM and
 * POOL2D_BWD are gathers: one work item per dx element visits, in row-major window order,
 * the windows that hold it, sums their contributions in f32, adds the old dx when
 * accumulating and rounds once; no atomics, so the bits are the same on every run, and the
 * elements between images (xb larger than an image) are never written. */

#define WIN_GEOM                                                                                   \
    ulong n, ulong C, ulong H, ulong W, ulong xb, ulong oh, ulong ow, uint kh, uint kw, uint sh,   \
        uint sw, uint ph, uint pw, uint dh, uint dw

/* Element (b, c, h, w) of x or dx. */
inline ulong win_x_at(ulong b, ulong c, ulong h, ulong w, ulong C, ulong H, ulong W, ulong xb) {
    return b * xb + (c * H + h) * W + w;
}

/* The in-plane rows [*lo, *hi) of the window starting at row `start` (padding < kernel, so
 * the range is never empty for a window of the op). */
inline void win_span(long start, uint k, ulong size, long *lo, long *hi) {
    *lo = start < 0 ? 0 : start;
    *hi = start + (long)k < (long)size ? start + (long)k : (long)size;
}

__kernel void im2col(CTENSOR(x), TENSOR(cols), WIN_GEOM) {
    ulong total = n * oh * ow * C * kh * kw;
    for (ulong e = GID; e < total; e += GSIZE) {
        ulong q, p, c, j, i;
        ulong r  = udivmod(e, kw, &q);
        r        = udivmod(r, kh, &p);
        r        = udivmod(r, C, &c);
        r        = udivmod(r, ow, &j);
        ulong b  = udivmod(r, oh, &i);
        long h   = (long)(i * sh) - (long)ph + (long)(p * dh);
        long w   = (long)(j * sw) - (long)pw + (long)(q * dw);
        int in   = h >= 0 && h < (long)H && w >= 0 && w < (long)W;
        ulong xi = in ? win_x_at(b, c, (ulong)h, (ulong)w, C, H, W, xb) : 0;
        if (x_dt != cols_dt)
            ST(cols, e, in ? LD(x, xi) : 0.0f);
        else if (x_dt == DT_F32)
            ((__global uint *)(cols_p + cols_o))[e] =
                in ? ((__global const uint *)(x_p + x_o))[xi] : 0u;
        else
            ((__global ushort *)(cols_p + cols_o))[e] =
                in ? ((__global const ushort *)(x_p + x_o))[xi] : (ushort)0;
    }
}

/* COL2IM: dx(b, c, h, w) gathers cols element (window (i, j), tap (p, q)) for every tap with
 * h = i sh - ph + p dh and w = j sw - pw + q dw; p runs down so that i runs up. */
__kernel void col2im(CTENSOR(cols), TENSOR(dx), WIN_GEOM, uint accumulate) {
    ulong total = n * C * H * W, taps = (ulong)kh * kw;
    for (ulong e = GID; e < total; e += GSIZE) {
        ulong w, h, c;
        ulong r = udivmod(e, W, &w);
        r       = udivmod(r, H, &h);
        ulong b = udivmod(r, C, &c);
        float s = 0.0f;
        for (uint p = kh; p-- > 0;) {
            long th = (long)h + (long)ph - (long)p * (long)dh;
            ulong i, off_h;
            if (th < 0) continue;
            i = udivmod((ulong)th, sh, &off_h);
            if (off_h != 0) continue;
            if (i >= oh) break;
            for (uint q = kw; q-- > 0;) {
                long tw = (long)w + (long)pw - (long)q * (long)dw;
                ulong j, off_w;
                if (tw < 0) continue;
                j = udivmod((ulong)tw, sw, &off_w);
                if (off_w != 0) continue;
                if (j >= ow) break;
                s += LD(cols, (((b * oh + i) * ow + j) * C + c) * taps + (ulong)p * kw + q);
            }
        }
        ulong xi = win_x_at(b, c, h, w, C, H, W, xb);
        if (accumulate) s = LD(dx, xi) + s;
        ST(dx, xi, s);
    }
}

/* POOL2D_FWD: MAX keeps the first NaN tap, else the first strictly largest (its bits when
 * the dtypes match), and its index h W + w when idx is given; AVG divides the f32 sum of the
 * in-plane taps by kh kw (count_pad) or by their number. */
__kernel void pool2d_fwd(CTENSOR(x), TENSOR(y), FARG(idx), WIN_GEOM, uint mode, uint count_pad) {
    IPTR(idx);
    ulong total = n * C * oh * ow;
    for (ulong e = GID; e < total; e += GSIZE) {
        ulong j, i, c;
        ulong r     = udivmod(e, ow, &j);
        r           = udivmod(r, oh, &i);
        ulong b     = udivmod(r, C, &c);
        ulong plane = win_x_at(b, c, 0, 0, C, H, W, xb);
        long h0, h1, w0, w1;
        win_span((long)(i * sh) - (long)ph, kh, H, &h0, &h1);
        win_span((long)(j * sw) - (long)pw, kw, W, &w0, &w1);
        if (mode == 0) { /* AMPX_POOL_MAX */
            float best = 0.0f;
            long at    = -1;
            for (long h = h0; h < h1 && !isnan(best); h++)
                for (long w = w0; w < w1; w++) {
                    float v = LD(x, plane + (ulong)(h * (long)W + w));
                    if (at < 0 || v > best || isnan(v)) best = v, at = h * (long)W + w;
                    if (isnan(v)) break;
                }
            if (x_dt == y_dt && x_dt == DT_F32)
                ((__global uint *)(y_p + y_o))[e] =
                    ((__global const uint *)(x_p + x_o))[plane + at];
            else if (x_dt == y_dt)
                ((__global ushort *)(y_p + y_o))[e] =
                    ((__global const ushort *)(x_p + x_o))[plane + at];
            else
                ST(y, e, best);
            if (idx) idx[e] = (int)at;
        } else {
            float s = 0.0f;
            for (long h = h0; h < h1; h++)
                for (long w = w0; w < w1; w++)
                    s += LD(x, plane + (ulong)(h * (long)W + w));
            ulong cnt = count_pad ? (ulong)kh * kw : (ulong)((h1 - h0) * (w1 - w0));
            ST(y, e, s / (float)cnt);
        }
    }
}

/* POOL2D_BWD: dx(b, c, h, w) sums, over the windows (i, j) of its plane that hold (h, w), in
 * row-major order, dy where the forward's index is h W + w (MAX) or dy / the forward's
 * divisor (AVG). */
__kernel void pool2d_bwd(CTENSOR(dy), FARG(idx), TENSOR(dx), WIN_GEOM, uint mode, uint count_pad,
                         uint accumulate) {
    IPTR(idx);
    ulong total = n * C * H * W;
    for (ulong e = GID; e < total; e += GSIZE) {
        ulong w, h, c;
        ulong r     = udivmod(e, W, &w);
        r           = udivmod(r, H, &h);
        ulong b     = udivmod(r, C, &c);
        ulong ybase = (b * C + c) * oh * ow;
        /* windows i with i sh - ph <= h < i sh - ph + kh, likewise j */
        long th = (long)h + (long)ph, tw = (long)w + (long)pw;
        long i0 = th - (long)kh + 1 <= 0 ? 0 : (th - (long)kh + (long)sh) / (long)sh;
        long j0 = tw - (long)kw + 1 <= 0 ? 0 : (tw - (long)kw + (long)sw) / (long)sw;
        long i1 = min(th / (long)sh, (long)oh - 1), j1 = min(tw / (long)sw, (long)ow - 1);
        long target = (long)(h * W + w);
        float s     = 0.0f;
        for (long i = i0; i <= i1; i++)
            for (long j = j0; j <= j1; j++) {
                ulong yi = ybase + (ulong)i * ow + (ulong)j;
                if (mode == 0) {
                    if ((long)idx[yi] == target) s += LD(dy, yi);
                    continue;
                }
                long a0, a1, b0, b1;
                win_span(i * (long)sh - (long)ph, kh, H, &a0, &a1);
                win_span(j * (long)sw - (long)pw, kw, W, &b0, &b1);
                ulong cnt = count_pad ? (ulong)kh * kw : (ulong)((a1 - a0) * (b1 - b0));
                s += LD(dy, yi) / (float)cnt;
            }
        ulong xi = win_x_at(b, c, h, w, C, H, W, xb);
        if (accumulate) s = LD(dx, xi) + s;
        ST(dx, xi, s);
    }
}
