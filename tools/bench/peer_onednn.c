/* peer_onednn.c — oneDNN matmul in bf16 or f32 (C API), timed like `ampx bench gemm`
 * (peer_common.h).
 *   peer_onednn bf16|f32 M N K [ta] [tb] [reps=R] [batch=N]
 * A, B and C all in the dtype (bf16 accumulates in f32 inside oneDNN), plain row-major
 * layouts (transposes as the "ba" tag; a batch is one 3-D matmul, "abc" / "acb"), oneDNN's own
 * threading and ISA choice; the implementation it picked is reported. */
#include <dnnl.h>

#include "peer_common.h"

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        dnnl_status_t st_ = (x);                                                                   \
        if (st_ != dnnl_success) {                                                                 \
            fprintf(stderr, "peer_onednn: %s failed (%d)\n", #x, (int)st_);                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct job {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_exec_arg_t args[3];
} job;

static void run(void *p) {
    job *j = p;
    CHECK(dnnl_primitive_execute(j->prim, j->stream, 3, j->args));
    CHECK(dnnl_stream_wait(j->stream));
}

static uint16_t to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static void fill(dnnl_memory_t mem, size_t n, int bf16, uint64_t seed) {
    void *h = NULL;
    CHECK(dnnl_memory_get_data_handle(mem, &h));
    for (size_t i = 0; i < n; i++) {
        float v = peer_unit(&seed);
        if (bf16)
            ((uint16_t *)h)[i] = to_bf16(v);
        else
            ((float *)h)[i] = v;
    }
}

int main(int argc, char **argv) {
    peer_args a;
    if (peer_parse(argc, argv, &a) || (strcmp(a.dtype, "f32") && strcmp(a.dtype, "bf16"))) {
        fprintf(stderr, "usage: peer_onednn bf16|f32 M N K [ta] [tb] [reps=R] [batch=N]\n");
        return 2;
    }
    int bf16            = !strcmp(a.dtype, "bf16");
    dnnl_data_type_t dt = bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_engine_t eng;
    job j;
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&j.stream, eng, dnnl_stream_default_flags));
    dnnl_memory_desc_t amd, bmd, cmd;
    if (a.batch > 1) {
        dnnl_dims_t ad = {a.batch, a.m, a.k}, bd = {a.batch, a.k, a.n}, cd = {a.batch, a.m, a.n};
        CHECK(dnnl_memory_desc_init_by_tag(&amd, 3, ad, dt, a.ta ? dnnl_acb : dnnl_abc));
        CHECK(dnnl_memory_desc_init_by_tag(&bmd, 3, bd, dt, a.tb ? dnnl_acb : dnnl_abc));
        CHECK(dnnl_memory_desc_init_by_tag(&cmd, 3, cd, dt, dnnl_abc));
    } else {
        dnnl_dims_t ad = {a.m, a.k}, bd = {a.k, a.n}, cd = {a.m, a.n};
        CHECK(dnnl_memory_desc_init_by_tag(&amd, 2, ad, dt, a.ta ? dnnl_ba : dnnl_ab));
        CHECK(dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dt, a.tb ? dnnl_ba : dnnl_ab));
        CHECK(dnnl_memory_desc_init_by_tag(&cmd, 2, cd, dt, dnnl_ab));
    }
    dnnl_matmul_desc_t md;
    CHECK(dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd));
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL);
    if (st == dnnl_unimplemented) { /* e.g. bf16 on a CPU without AVX512/AMX */
        fprintf(stderr,
                "peer_onednn: oneDNN %d.%d has no %s matmul for this CPU "
                "(dnnl_unimplemented)\n",
                dnnl_version()->major, dnnl_version()->minor, a.dtype);
        return 1;
    }
    CHECK(st);
    CHECK(dnnl_primitive_create(&j.prim, pd));
    const char *impl = "?";
    CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    dnnl_memory_t am, bm, cm;
    CHECK(dnnl_memory_create(&am, &amd, eng, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&bm, &bmd, eng, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&cm, &cmd, eng, DNNL_MEMORY_ALLOCATE));
    fill(am, (size_t)a.m * a.k * a.batch, bf16, 1);
    fill(bm, (size_t)a.k * a.n * a.batch, bf16, 2);
    j.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, am};
    j.args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, bm};
    j.args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, cm};
    int reps;
    double t = peer_time(run, &j, a.reps, &reps);
    char impl_s[160];
    const dnnl_version_t *v = dnnl_version();
    snprintf(impl_s, sizeof impl_s, "oneDNN %d.%d.%d %s", v->major, v->minor, v->patch, impl);
    peer_report("onednn", impl_s, &a, t, reps);
    dnnl_memory_destroy(am), dnnl_memory_destroy(bm), dnnl_memory_destroy(cm);
    dnnl_primitive_destroy(j.prim), dnnl_primitive_desc_destroy(pd);
    dnnl_stream_destroy(j.stream), dnnl_engine_destroy(eng);
    return 0;
}
