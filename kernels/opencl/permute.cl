/* permute.cl — PERMUTE in the loop form the host gives (4 dims, unit dims padded in front, dim
 * 3 walking y with the smallest stride): work item i takes the index (i0, i1, i2, i3) that is
 * i in row-major order over the dims, so neighbouring items write neighbouring elements of y
 * when its smallest stride is 1. Same dtypes copy the bits (NaN payloads included); otherwise
 * each element is widened exactly and rounded once to nearest even. */
__kernel void permute(CTENSOR(x), TENSOR(y), ulong n, ulong d1, ulong d2, ulong d3, ulong xs0,
                      ulong xs1, ulong xs2, ulong xs3, ulong ys0, ulong ys1, ulong ys2, ulong ys3) {
    for (ulong i = GID; i < n; i += GSIZE) {
        ulong i3, i2, i1;
        ulong r  = udivmod(i, d3, &i3);
        r        = udivmod(r, d2, &i2);
        ulong i0 = udivmod(r, d1, &i1);
        ulong xi = i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3;
        ulong yi = i0 * ys0 + i1 * ys1 + i2 * ys2 + i3 * ys3;
        if (x_dt != y_dt)
            ST(y, yi, LD(x, xi));
        else if (x_dt == DT_F32)
            ((__global uint *)(y_p + y_o))[yi] = ((__global const uint *)(x_p + x_o))[xi];
        else
            ((__global ushort *)(y_p + y_o))[yi] = ((__global const ushort *)(x_p + x_o))[xi];
    }
}
