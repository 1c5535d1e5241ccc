/* unscale_check.cl — UNSCALE_CHECK's first kernel: the call's flags zeroed, on the stream
 * before the typed unscale_check of each tensor (typed/amp.cl). */
__kernel void unscale_clear_flags(FARG(flags), uint count) {
    IPTR(flags);
    for (ulong t = GID; t < count; t += GSIZE)
        flags[t] = 0;
}
