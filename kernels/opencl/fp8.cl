/* fp8.cl — FP8_QUANTIZE and FP8_SCALE_UPDATE (backend.h, ABI 1.7), with common.cl's fp8
 * conversions (dtype.h's, bit for bit) and kernel_math.h's scale arithmetic.
 *
 * fp8_quantize: work-groups of WG items, grid-stride over the n elements. Each item rounds
 * f32(x * scale) to the fp8 code and keeps the largest |x| it saw (as the bits of a
 * non-negative float, NaNs skipped) and its overflow and flush-to-zero counts; the group
 * reduces them and item 0 folds them into amax and counts, one atomic each. Non-negative
 * floats order as their bits do as ints, so atomic_max on the bits is the float max: a
 * negative amax (sign bit set) is below any, infinity is kept, and a NaN already in amax
 * stays (no |x| is larger). The amax is a max and the counts are sums, so the result does
 * not depend on the order the groups run in.
 * fp8_dequantize: grid-stride, y = round(f32(fp8 value) * scale).
 * fp8_scale_update: one work item per tensor of the FP8 STATE block. */

__kernel REDUCE_WG void fp8_quantize(CTENSOR(src), FARG(dst), int dst_dt, int saturate, ulong n,
                                     FARG(scale), FARG(amax), FARG(counts)) {
    __local int red[WG];
    __global uchar *y = dst_p + dst_o;
    const float s     = ((__global const float *)(scale_p + scale_o))[0];
    int mx            = -1; /* the bits of the largest |x| seen, -1 for none */
    uint overflows = 0u, flushed = 0u;
    for (ulong i = GID; i < n; i += GSIZE) {
        float x = LD(src, i);
        int ovf;
        uchar q = f32_to_fp8(x * s, dst_dt, saturate, &ovf);
        if (saturate == 2 && isinf(x)) /* an infinite input stays non-finite */
            q = (uchar)((q & 0x80u) | (dst_dt == DT_E4M3 ? 0x7fu : 0x7cu));
        y[i]    = q;
        uint ax = as_uint(x) & 0x7fffffffu;
        if (ax <= 0x7f800000u) mx = max(mx, (int)ax);
        overflows += (uint)ovf;
        flushed += (ax != 0u && ax < 0x7f800000u && (q & 0x7fu) == 0u) ? 1u : 0u;
    }
    /* every item reaches the barriers of both reductions; item 0 stores what was asked */
    mx                 = wg_max_i(mx, red);
    __local uint *redu = (__local uint *)red;
    overflows          = wg_sum_u(overflows, redu);
    flushed            = wg_sum_u(flushed, redu);
    if (get_local_id(0) == 0) {
        if (amax_p && mx >= 0) atomic_max((__global int *)(amax_p + amax_o), mx);
        if (counts_p) {
            __global int *c = (__global int *)(counts_p + counts_o);
            if (overflows) atomic_add(&c[0], (int)overflows);
            if (flushed) atomic_add(&c[1], (int)flushed);
        }
    }
}

__kernel void fp8_dequantize(FARG(src), int src_dt, TENSOR(dst), ulong n, FARG(scale)) {
    __global const uchar *x = src_p + src_o;
    const float s           = ((__global const float *)(scale_p + scale_o))[0];
    for (ulong i = GID; i < n; i += GSIZE)
        ST(dst, i, fp8_to_f32(x[i], src_dt) * s);
}

/* FP8_SCALE_UPDATE for tensors i in [0, n) of the block state (scale[n], scale_inv[n],
 * history[H][n]): the history's amax (algo 0: the largest, NaN-propagating, kernel_math.h's
 * ampx_km_fp8_max_step; 1: row 0), the new scale (ampx_km_fp8_scale) and its correctly
 * rounded inverse, then the history rolled by one row with row 0 cleared. skip and the
 * block's found_inf set: only row 0 is cleared. */
__kernel void fp8_scale_update(FARG(state), FARG(fp8_max), FARG(scalars), ulong n, uint H,
                               int margin, uint algo, int skip) {
    FPTR(state);
    FPTR(fp8_max);
    __global float *hist = state + 2 * n;
    int skipped          = 0;
    if (skip) skipped = ((__global const ampx_scalars *)(scalars_p + scalars_o))->found_inf != 0;
    for (ulong i = GID; i < n; i += GSIZE) {
        if (skipped) {
            hist[i] = 0.0f;
            continue;
        }
        float h0 = hist[i], amax = h0;
        if (algo == 0u)
            for (uint h = 1; h < H; h++)
                amax = ampx_km_fp8_max_step(amax, hist[(ulong)h * n + i]);
        float sc     = ampx_km_fp8_scale(amax, state[i], fp8_max[i], margin);
        state[i]     = sc;
        state[n + i] = 1.0f / sc;
        for (uint h = 0; h + 1 < H; h++)
            hist[(ulong)h * n + i] = hist[(ulong)(h + 1) * n + i];
        hist[(ulong)(H - 1) * n + i] = h0;
        hist[i]                      = 0.0f;
    }
}
