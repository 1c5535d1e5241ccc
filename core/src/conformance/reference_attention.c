/* reference_attention.c — the double-precision reference of ABI 1.5's attention ops,
 * ATTN_FWD and ATTN_BWD: the whole softmax row at once in double, from backend.h's formulas. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/reference.h"

int ref_attn_keep(const ref_attn_shape *s, uint64_t b, uint64_t h, uint64_t i, uint64_t j) {
    uint64_t e = ((b * s->heads + h) * s->seq + i) * s->seq + j;
    return ref_hash32(s->seed, s->offset + e) >= s->threshold;
}

/* Element (b, t, h, c) of a compact [batch, seq, heads * head_dim] array. */
static uint64_t ref_attn_at(const ref_attn_shape *s, uint64_t b, uint64_t t, uint64_t h,
                            uint64_t c) {
    return (b * s->seq + t) * s->heads * s->head_dim + h * s->head_dim + c;
}

/* Row i's scores s_ij = scale q_i . k_j for j < seq (-inf where masked) and, in sabs, the
 * sums of |scale q_ic k_jc|. */
static void ref_attn_scores(const ref_attn_shape *s, const double *q, const double *k, uint64_t b,
                            uint64_t h, uint64_t i, double *sc, double *sabs) {
    const double *qi = q + ref_attn_at(s, b, i, h, 0); /* a head's columns are contiguous */
    for (uint64_t j = 0; j < s->seq; j++) {
        double aa, acc = ref_dot(qi, k + ref_attn_at(s, b, j, h, 0), s->head_dim, &aa);
        sc[j] = s->causal && j > i ? -INFINITY : s->scale * acc;
        if (sabs) sabs[j] = fabs(s->scale) * aa;
    }
}

void ref_attn_fwd(const ref_attn_shape *s, const double *q, const double *k, const double *v,
                  double *o, double *lse, double *mag) {
    uint64_t T = s->seq, hd = s->head_dim;
    double *sc = malloc(3 * T * sizeof *sc), *sabs = sc + T, *pj = sabs + T;
    if (!sc) return;
    for (uint64_t b = 0; b < s->batch; b++)
        for (uint64_t h = 0; h < s->heads; h++)
            for (uint64_t i = 0; i < T; i++) {
                ref_attn_scores(s, q, k, b, h, i, sc, sabs);
                double mx = -INFINITY, sum = 0.0;
                for (uint64_t j = 0; j < T; j++)
                    mx = fmax(mx, sc[j]);
                for (uint64_t j = 0; j < T; j++)
                    sum += exp(sc[j] - mx);
                double l                        = mx + log(sum);
                lse[(b * s->heads + h) * T + i] = l;
                for (uint64_t j = 0; j < T; j++) { /* p_ij, dropout applied, once per row */
                    pj[j] = sc[j] == -INFINITY ? 0.0 : exp(sc[j] - l);
                    if (s->threshold && sc[j] != -INFINITY)
                        pj[j] = ref_attn_keep(s, b, h, i, j) ? pj[j] * s->dropout_scale : 0.0;
                }
                double *oi = o + ref_attn_at(s, b, i, h, 0), *mi = mag ? mag + (oi - o) : NULL;
                for (uint64_t c = 0; c < hd; c++) { /* summed over j in order, row by row */
                    oi[c] = 0.0;
                    if (mi) mi[c] = 0.0;
                }
                for (uint64_t j = 0; j < T; j++) {
                    if (sc[j] == -INFINITY) continue;
                    const double *vj = v + ref_attn_at(s, b, j, h, 0);
                    for (uint64_t c = 0; c < hd; c++)
                        oi[c] += pj[j] * vj[c];
                    for (uint64_t c = 0; mi && c < hd; c++)
                        mi[c] += pj[j] * fabs(vj[c]) * (1.0 + sabs[j] + fabs(l));
                }
            }
    free(sc);
}

void ref_attn_bwd(const ref_attn_shape *s, const double *q, const double *k, const double *v,
                  const double *o, const double *lse, const double *d_o, double *dq, double *dk,
                  double *dv, double *delta, double *mag_dq, double *mag_dk) {
    uint64_t T = s->seq, hd = s->head_dim, n = s->batch * T * s->heads * hd;
    double *sc = malloc(4 * T * sizeof *sc), *ds = sc + T, *sabs = ds + T, *mds = sabs + T;
    if (!sc) return;
    memset(dq, 0, n * sizeof *dq);
    memset(dk, 0, n * sizeof *dk);
    memset(dv, 0, n * sizeof *dv);
    if (mag_dq) memset(mag_dq, 0, n * sizeof *mag_dq);
    if (mag_dk) memset(mag_dk, 0, n * sizeof *mag_dk);
    for (uint64_t b = 0; b < s->batch; b++)
        for (uint64_t h = 0; h < s->heads; h++)
            for (uint64_t i = 0; i < T; i++) {
                uint64_t r = (b * s->heads + h) * T + i;
                /* in ref_dot's order, as dp below: where p = 1, dp - di is exactly 0 */
                double dia, di = ref_dot(d_o + ref_attn_at(s, b, i, h, 0),
                                         o + ref_attn_at(s, b, i, h, 0), hd, &dia);
                delta[r] = di;
                ref_attn_scores(s, q, k, b, h, i, sc, sabs);
                for (uint64_t j = 0; j < T; j++) {
                    ds[j] = mds[j] = 0.0;
                    if (sc[j] == -INFINITY) continue;
                    double p = exp(sc[j] - lse[r]), keep = 1.0;
                    if (s->threshold) keep = ref_attn_keep(s, b, h, i, j) ? s->dropout_scale : 0.0;
                    const double *gi = d_o + ref_attn_at(s, b, i, h, 0);
                    double dpa, dp = ref_dot(gi, v + ref_attn_at(s, b, j, h, 0), hd, &dpa);
                    double *dvj = dv + ref_attn_at(s, b, j, h, 0);
                    for (uint64_t c = 0; c < hd; c++)
                        dvj[c] += keep * p * gi[c];
                    ds[j] = s->scale * p * (keep * dp - di);
                    mds[j] =
                        fabs(s->scale) * p * (1.0 + sabs[j] + fabs(lse[r])) * (keep * dpa + dia);
                }
                uint64_t ei = ref_attn_at(s, b, i, h, 0);
                for (uint64_t j = 0; j < T; j++) {
                    if (mds[j] == 0.0) continue;
                    uint64_t ej = ref_attn_at(s, b, j, h, 0);
                    for (uint64_t c = 0; c < hd; c++) {
                        dq[ei + c] += ds[j] * k[ej + c];
                        dk[ej + c] += ds[j] * q[ei + c];
                    }
                    for (uint64_t c = 0; mag_dq && c < hd; c++)
                        mag_dq[ei + c] += mds[j] * fabs(k[ej + c]);
                    for (uint64_t c = 0; mag_dk && c < hd; c++)
                        mag_dk[ej + c] += mds[j] * fabs(q[ei + c]);
                }
            }
    free(sc);
}
