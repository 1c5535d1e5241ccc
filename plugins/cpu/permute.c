/* permute.c — PERMUTE: a strided N-D copy with dtype conversion (transposes, head split and
 * merge).
 *
 * ampx_kit_take_permute hands over the copy in its loop form: 4 dims, the last one walking y with
 * the smallest stride. Of the other three, the one walking x with the smallest stride moves
 * next to it, and the two are cut into tiles of PERMUTE_TILE elements (up to 128 rows of the
 * x-friendly dim by PERMUTE_TILE / rows elements of the y-friendly one). When x is read best
 * along the rows (a transpose), a tile is read in runs along them into a stage in cache and
 * written from it in runs along dim 3: a blocked transpose. Tiles are the items threads take,
 * and never share an output element (the y strides map distinct indices to distinct
 * elements, the caller's contract). The tile shape was picked on a 4096 x 4096 f32
 * transpose: 128 x 64 took about 3x the time of a copy, 64 x 64 about 5x.
 *
 * Same dtypes: the elements' bits are copied (NaN payloads included). Otherwise each element
 * is widened exactly to f32 and rounded once to y's dtype to nearest even, runs of unit
 * stride through the table's converters, strided ones one element at a time with dtype.h.
 */
#include <string.h>

#include "cpu.h"

#define PERMUTE_TILE_ROWS 128u
#define PERMUTE_TILE 8192u /* elements: a stage of 32 KiB on the stack */

typedef enum permute_mode { COPY32, COPY16, CONVERT } permute_mode;

typedef struct permute_job {
    const unsigned char *x;
    unsigned char *y;
    ampx_dtype xdt, ydt;
    permute_mode mode;
    uint64_t dims[4], xs[4], ys[4];     /* loop order: 3 is the y-friendly dim, 2 the x-friendly */
    uint64_t rows, run, n_rows, n_runs; /* tile: rows of dim 2 by run elements of dim 3 */
    int staged;                         /* x is read along dim 2: the tile goes through stage */
} permute_job;

/* A tile's elements on their way from x to y: their bits when the dtypes match, else their
 * values widened to f32. */
typedef union permute_stage {
    uint32_t u32[PERMUTE_TILE];
    uint16_t u16[PERMUTE_TILE];
    float f[PERMUTE_TILE];
} permute_stage;

/* Stage element k0 + k * k_stride = x element i0 + k * stride, for k < n. */
static void gather(const permute_job *j, permute_stage *st, uint64_t k0, uint64_t k_stride,
                   uint64_t i0, uint64_t stride, uint64_t n) {
    const void *x = j->x;
    switch (j->mode) {
    case COPY32:
        if (k_stride == 1 && stride == 1)
            memcpy(st->u32 + k0, (const uint32_t *)x + i0, (size_t)n * 4);
        else
            for (uint64_t k = 0; k < n; k++)
                st->u32[k0 + k * k_stride] = ((const uint32_t *)x)[i0 + k * stride];
        break;
    case COPY16:
        if (k_stride == 1 && stride == 1)
            memcpy(st->u16 + k0, (const uint16_t *)x + i0, (size_t)n * 2);
        else
            for (uint64_t k = 0; k < n; k++)
                st->u16[k0 + k * k_stride] = ((const uint16_t *)x)[i0 + k * stride];
        break;
    case CONVERT:
        if (k_stride == 1 && stride == 1)
            cpu_load_f32(st->f + k0, x, j->xdt, i0, n);
        else
            for (uint64_t k = 0; k < n; k++)
                st->f[k0 + k * k_stride] = cpu_ld(x, j->xdt, i0 + k * stride);
        break;
    }
}

/* y element i0 + k * stride = stage element k0 + k, for k < n. */
static void scatter(const permute_job *j, const permute_stage *st, uint64_t k0, uint64_t i0,
                    uint64_t stride, uint64_t n) {
    void *y = j->y;
    switch (j->mode) {
    case COPY32:
        if (stride == 1)
            memcpy((uint32_t *)y + i0, st->u32 + k0, (size_t)n * 4);
        else
            for (uint64_t k = 0; k < n; k++)
                ((uint32_t *)y)[i0 + k * stride] = st->u32[k0 + k];
        break;
    case COPY16:
        if (stride == 1)
            memcpy((uint16_t *)y + i0, st->u16 + k0, (size_t)n * 2);
        else
            for (uint64_t k = 0; k < n; k++)
                ((uint16_t *)y)[i0 + k * stride] = st->u16[k0 + k];
        break;
    case CONVERT:
        if (stride == 1)
            cpu_store_f32(y, j->ydt, i0, st->f + k0, n);
        else
            for (uint64_t k = 0; k < n; k++)
                cpu_st(y, j->ydt, i0 + k * stride, st->f[k0 + k]);
        break;
    }
}

/* Item = (i0, i1, tile of rows, tile of the run), the run tile fastest. A staged tile is read
 * in runs along dim 2 and written in runs along dim 3 (transposed in between, in cache);
 * otherwise each row of the tile is one run along dim 3 both ways. */
static void permute_tile(void *arg, uint64_t item, unsigned tid) {
    (void)tid;
    const permute_job *j = arg;
    uint64_t tb          = item % j->n_runs;
    uint64_t r           = item / j->n_runs;
    uint64_t ta          = r % j->n_rows;
    r /= j->n_rows;
    uint64_t i1 = r % j->dims[1], i0 = r / j->dims[1];
    uint64_t a0 = ta * j->rows, na = j->dims[2] - a0 < j->rows ? j->dims[2] - a0 : j->rows;
    uint64_t b0 = tb * j->run, nb = j->dims[3] - b0 < j->run ? j->dims[3] - b0 : j->run;
    uint64_t bx = i0 * j->xs[0] + i1 * j->xs[1] + a0 * j->xs[2] + b0 * j->xs[3];
    uint64_t by = i0 * j->ys[0] + i1 * j->ys[1] + a0 * j->ys[2] + b0 * j->ys[3];
    permute_stage st;
    if (j->staged) {
        for (uint64_t b = 0; b < nb; b++) /* stage[a * nb + b] */
            gather(j, &st, b, nb, bx + b * j->xs[3], j->xs[2], na);
        for (uint64_t a = 0; a < na; a++)
            scatter(j, &st, a * nb, by + a * j->ys[2], j->ys[3], nb);
    } else if (j->mode == COPY32 && j->xs[3] == 1 && j->ys[3] == 1) { /* rows of plain bytes */
        for (uint64_t a = 0; a < na; a++)
            memcpy((uint32_t *)(void *)j->y + by + a * j->ys[2],
                   (const uint32_t *)(const void *)j->x + bx + a * j->xs[2], (size_t)nb * 4);
    } else if (j->mode == COPY16 && j->xs[3] == 1 && j->ys[3] == 1) {
        for (uint64_t a = 0; a < na; a++)
            memcpy((uint16_t *)(void *)j->y + by + a * j->ys[2],
                   (const uint16_t *)(const void *)j->x + bx + a * j->xs[2], (size_t)nb * 2);
    } else {
        for (uint64_t a = 0; a < na; a++) {
            gather(j, &st, 0, 1, bx + a * j->xs[2], j->xs[3], nb);
            scatter(j, &st, 0, by + a * j->ys[2], j->ys[3], nb);
        }
    }
}

ampx_status cpu_permute(ampx_context *ctx, const ampx_permute_args *args) {
    ampx_permute_args a, loop;
    uint64_t n;
    CPU_TRY(ampx_kit_take_permute(AMPX_KIT(ctx), args, &a, &loop, &n));
    if (n == 0) return AMPX_OK;
    permute_job j = {.x    = cpu_ptr(&loop.x),
                     .y    = cpu_ptr(&loop.y),
                     .xdt  = a.x.dtype,
                     .ydt  = a.y.dtype,
                     .mode = a.x.dtype != a.y.dtype            ? CONVERT
                             : ampx_dtype_size(a.x.dtype) == 4 ? COPY32
                                                               : COPY16};
    memcpy(j.dims, loop.dims, sizeof j.dims);
    memcpy(j.xs, loop.x_strides, sizeof j.xs);
    memcpy(j.ys, loop.y_strides, sizeof j.ys);
    /* Of dims 0-2, the one with the smallest x stride (unit dims do not count) becomes dim 2;
     * the order of the outer loops is free. */
    unsigned t = 2;
    for (unsigned d = 0; d < 2; d++)
        if (j.dims[d] > 1 && (j.dims[t] == 1 || j.xs[d] < j.xs[t])) t = d;
    if (t != 2) {
        uint64_t s;
        s = j.dims[t], j.dims[t] = j.dims[2], j.dims[2] = s;
        s = j.xs[t], j.xs[t] = j.xs[2], j.xs[2] = s;
        s = j.ys[t], j.ys[t] = j.ys[2], j.ys[2] = s;
    }
    j.rows   = j.dims[2] < PERMUTE_TILE_ROWS ? j.dims[2] : PERMUTE_TILE_ROWS;
    j.run    = PERMUTE_TILE / j.rows;
    j.n_rows = cpu_div_up(j.dims[2], j.rows);
    j.n_runs = cpu_div_up(j.dims[3], j.run);
    j.staged = j.rows > 1 && j.xs[2] < j.xs[3];
    cpu_run(ctx, n, j.dims[0] * j.dims[1] * j.n_rows * j.n_runs, permute_tile, &j);
    return AMPX_OK;
}
