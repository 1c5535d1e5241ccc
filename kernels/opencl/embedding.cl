/* embedding.cl — EMBEDDING_FWD (a gather: y[i, :] = table[ids[i], :], zero rows for ids out
 * of range) and EMBEDDING_BWD (dtable[ids[i], :] += dy[i, :] in f32). The backward gives
 * each work item whole columns and walks the ids in order, so repeated ids accumulate
 * without atomics and in the same order on every run. */
__kernel void embedding_fwd(CTENSOR(table), FARG(ids), TENSOR(y), ulong n, ulong vocab, ulong dim) {
    IPTR(ids);
    ulong total = n * dim;
    for (ulong k = GID; k < total; k += GSIZE) {
        ulong d, i = udivmod(k, dim, &d);
        int id  = ids[i];
        float v = (id >= 0 && (ulong)id < vocab) ? LD(table, (ulong)id * dim + d) : 0.0f;
        ST(y, k, v);
    }
}

__kernel void embedding_bwd(FARG(dtable), FARG(ids), CTENSOR(dy), ulong n, ulong vocab, ulong dim) {
    FPTR(dtable);
    IPTR(ids);
    for (ulong d = GID; d < dim; d += GSIZE)
        for (ulong i = 0; i < n; i++) {
            int id = ids[i];
            if (id >= 0 && (ulong)id < vocab) dtable[(ulong)id * dim + d] += LD(dy, i * dim + d);
        }
}
