/* cases_embedding.c — conformance cases of EMBEDDING_FWD and EMBEDDING_BWD. */
#include <inttypes.h>
#include <string.h>

#include "conformance/harness.h"

CONF_DEFINE_CALL(call_embedding, ampx_embedding_args)

// ---------------------------------------------------------------------------------------
// Embedding: the gather is exact; the scatter-add has duplicates and out-of-range ids.

static void case_embedding(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant,
                           int bwd) {
    static const struct {
        uint64_t n, vocab, dim;
        int zero_init;
    } cfgs[] = {
        {1, 1, 1, 0},
        {7, 13, 31, 1},
        {100, 50, 67, 0},
        {31, 1000, 128, 1},
        /* large tier: rows wider than a column block; many narrow rows */
        {97, 100, 1031, 0},
        {2000, 500, 40, 1},
    };
    uint64_t n = cfgs[variant].n, vocab = cfgs[variant].vocab, dim = cfgs[variant].dim;
    conf_shape(cc, "n=%" PRIu64 " vocab=%" PRIu64 " dim=%" PRIu64 "%s", n, vocab, dim,
               bwd && cfgs[variant].zero_init ? " dtable=0" : "");
    conf_tensor *T  = conf_tensor_new(cc, bwd ? "dtable" : "table", bwd ? dts[1] : dts[0],
                                      vocab * dim, bwd ? CT_INOUT : CT_IN);
    conf_tensor *ID = conf_tensor_new(cc, "ids", AMPX_I32, n, CT_IN);
    conf_tensor *Y =
        conf_tensor_new(cc, bwd ? "dy" : "y", bwd ? dts[0] : dts[1], n * dim, bwd ? CT_IN : CT_OUT);
    int32_t *ids  = conf_alloc(cc, n * sizeof(int32_t));
    uint32_t *dup = conf_alloc(cc, vocab * sizeof(uint32_t));
    double *ref   = conf_alloc(cc, (bwd ? vocab : n) * dim * sizeof(double));
    double *mag   = conf_alloc(cc, vocab * dim * sizeof(double));
    if (!conf_ok(cc)) goto done;
    /* ids from a small range so rows repeat; a few out of range */
    for (uint64_t i = 0; i < n; i++)
        ids[i] = (int32_t)(conf_next(&cc->rng) % (vocab < 20 ? vocab : vocab / 4 + 1));
    if (n >= 7) {
        ids[1] = -1;
        ids[4] = (int32_t)vocab;
        ids[5] = INT32_MIN;
    }
    for (uint64_t i = 0; i < n; i++)
        conf_tensor_set(ID, i, ids[i]);
    if (bwd && cfgs[variant].zero_init)
        for (uint64_t i = 0; i < T->n; i++)
            conf_tensor_set(T, i, 0.0);
    else
        conf_tensor_fill(cc, T, -1, 1);
    if (bwd) conf_tensor_fill(cc, Y, -1, 1);
    ampx_embedding_args a = {sizeof a, n, vocab, dim, T->t, ID->t, Y->t};
    if (conf_upload(cc) ||
        conf_finish_call(
            cc, bwd ? "embedding_bwd" : "embedding_fwd",
            call_embedding(r, bwd ? AMPX_OP_EMBEDDING_BWD : AMPX_OP_EMBEDDING_FWD, &a)))
        goto done;
    if (!bwd) {
        ref_embedding_fwd(n, vocab, dim, T->v, ids, ref);
        for (uint64_t i = 0; i < n * dim; i++)
            ref[i] = ref_round(Y->dt, ref[i]);
        double *g = conf_values(cc, Y);
        if (g) conf_compare(cc, "y", g, ref, NULL, n * dim, Y->dt, 0, CMP_EXACT);
    } else {
        uint32_t maxdup = 0;
        for (uint64_t i = 0; i < n; i++)
            if (ids[i] >= 0 && (uint64_t)ids[i] < vocab && ++dup[ids[i]] > maxdup)
                maxdup = dup[ids[i]];
        memcpy(ref, T->v, vocab * dim * sizeof(double));
        ref_embedding_bwd(n, vocab, dim, Y->v, ids, ref, mag);
        double *g = conf_values(cc, T);
        if (g)
            conf_compare(cc, "dtable", g, ref, mag, vocab * dim, AMPX_F32, (double)maxdup + 1,
                         CMP_NORM | CMP_ELEM);
    }
done:
    return;
}

void conf_case_embedding_fwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_embedding(r, cc, dts, variant, 0);
}

void conf_case_embedding_bwd(conf_run *r, conf_case_ctx *cc, const ampx_dtype *dts, int variant) {
    case_embedding(r, cc, dts, variant, 1);
}

/* The sweep's entries: case function, variants of the full and the quick sweep, filter. */
const conf_op_cases conf_op_embedding_fwd = {conf_case_embedding_fwd, 6, 3, NULL};
const conf_op_cases conf_op_embedding_bwd = {conf_case_embedding_bwd, 6, 3, NULL};
