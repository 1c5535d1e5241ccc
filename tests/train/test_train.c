/* test_train.c — training through the executor on the CPU backend: finite-difference
 * gradients through the graph for every node's backward, the scaler state machine against
 * an independent model of PyTorch's GradScaler, skipped steps leaving every parameter and
 * optimizer state bitwise unchanged, bf16/f16 accuracy parity with f32, bit-identical resume. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ampx/ampx.h"
#include "ampx/inject.h"
#include "ampx/train.h"

static ampx_backend *open_cpu(void) {
    ampx_backend *be = NULL;
    char err[512];
    const char *opts[] = {"threads=2"};
    cr_assert_eq(ampx_backend_open(AMPX_TEST_CPU_PLUGIN, opts, 1, &be, err, sizeof err), AMPX_OK,
                 "%s", err);
    return be;
}

static char *write_model(const char *json) {
    char *path = strdup("/tmp/ampx_model_XXXXXX");
    int fd     = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(json, f);
    fclose(f);
    return path;
}

static ampx_model *load(const char *path, const char *policy) {
    ampx_model *m = NULL;
    char err[1024];
    cr_assert_eq(ampx_model_load(path, policy, &m, err, sizeof err), AMPX_OK, "%s", err);
    return m;
}

static ampx_trainer *trainer(ampx_model *m, ampx_backend *be) {
    ampx_trainer *t = NULL;
    char err[1024];
    cr_assert_eq(ampx_trainer_create(m, be, &t, err, sizeof err), AMPX_OK, "%s", err);
    return t;
}

// ---------------------------------------------------------------------------------------
// Finite differences: for graphs that use each node kind, every parameter's gradient from the
// backward agrees with central differences of the forward loss (f32 policy, scale 1).

static const char *fd_graph_fmt = "{\"name\":\"fd\",\"inputs\":{%s},\"nodes\":[%s],"
                                  "\"loss\":%s,\"policy\":\"f32\",\"scaler\":\"none\","
                                  "\"data\":{\"samples\":400},\"train\":{\"batch\":16,\"seed\":3}}";
static const char *fd_inputs =
    "\"x\":{\"dtype\":\"f32\",\"shape\":[4]},\"y\":{\"dtype\":\"i32\",\"classes\":3}";
static const char *fd_xent = "{\"logits\":\"out\",\"labels\":\"y\"}";

/* The step of the central differences, relative to max(1, |w|). */
static double fd_step = 1e-2;

static void fd_check_json(const char *json, const char *nodes) {
    char *path       = write_model(json);
    ampx_model *m    = load(path, NULL);
    ampx_backend *be = open_cpu();
    ampx_trainer *t  = trainer(m, be);
    double loss0;
    cr_assert_eq(ampx_trainer_gradients(t, 0, &loss0), AMPX_OK, "%s", ampx_trainer_error(t));
    int checked = 0;
    for (int p = 0; p < ampx_trainer_n_params(t); p++) {
        uint64_t n = ampx_trainer_param_size(t, p);
        float *w = malloc(n * 4), *g = malloc(n * 4), *w2 = malloc(n * 4);
        cr_assert_eq(ampx_trainer_get(t, p, 0, w), AMPX_OK);
        /* the gradient of the loss on rows 0..15, recomputed with unperturbed weights */
        double l;
        cr_assert_eq(ampx_trainer_gradients(t, 0, &l), AMPX_OK);
        cr_assert_eq(ampx_trainer_get(t, p, 1, g), AMPX_OK);
        for (int k = 0; k < 8; k++) {
            uint64_t i = ((uint64_t)k * 7919u + 13u) % n;
            double h   = fd_step * fmax(1.0, fabs(w[i])), lp, lm;
            memcpy(w2, w, n * 4);
            w2[i]     = (float)(w[i] + h);
            double hp = (double)w2[i] - w[i];
            ampx_trainer_set(t, p, 0, w2);
            ampx_trainer_gradients(t, 0, &lp);
            w2[i]     = (float)(w[i] - h);
            double hm = w[i] - (double)w2[i];
            ampx_trainer_set(t, p, 0, w2);
            ampx_trainer_gradients(t, 0, &lm);
            ampx_trainer_set(t, p, 0, w);
            double fd  = (lp - lm) / (hp + hm);
            double tol = 2e-4 + 1e-2 * fabs(fd);
            cr_expect(fabs(fd - g[i]) <= tol, "%s: %s[%llu]: backward %.6g, finite difference %.6g",
                      nodes, ampx_trainer_param_name(t, p), (unsigned long long)i, (double)g[i],
                      fd);
            checked++;
        }
        free(w), free(g), free(w2);
    }
    cr_assert_gt(checked, 0);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(path);
    free(path);
}

static void fd_check_model(const char *inputs, const char *nodes, const char *loss) {
    char json[8192];
    snprintf(json, sizeof json, fd_graph_fmt, inputs, nodes, loss);
    fd_check_json(json, nodes);
}

static void fd_check(const char *nodes) {
    fd_check_model(fd_inputs, nodes, fd_xent);
}

/* A token model on the embedded text: ids [6] and their successors as labels. */
static const char *fd_token_fmt =
    "{\"name\":\"fdlm\",\"inputs\":{\"ids\":{\"dtype\":\"i32\",\"shape\":[6]},"
    "\"next\":{\"dtype\":\"i32\",\"shape\":[6],\"classes\":256}},\"nodes\":[%s],"
    "\"loss\":{\"logits\":\"out\",\"labels\":\"next\"},\"policy\":\"f32\",\"scaler\":\"none\","
    "\"data\":{\"source\":\"embedded_text\",\"bytes\":20000},\"train\":{\"batch\":3,\"seed\":5}}";

static void fd_check_tokens(const char *nodes) {
    char json[8192];
    snprintf(json, sizeof json, fd_token_fmt, nodes);
    fd_check_json(json, nodes);
}

/* embedding, learned positions, causal attention, a tied head and the per-position loss */
static const char *gpt_block =
    "{\"name\":\"wte\",\"op\":\"embedding\",\"inputs\":[\"ids\"],\"vocab\":256,\"dim\":8,"
    "\"init\":{\"std\":0.5}},"
    "{\"name\":\"pos\",\"op\":\"position_embedding\",\"inputs\":[\"wte\"],\"init\":{\"std\":0.5}},"
    "{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"pos\"]},"
    "{\"name\":\"attn\",\"op\":\"attention\",\"inputs\":[\"ln\"],\"heads\":2,\"init\":{\"std\":0.5}"
    "},"
    "{\"name\":\"res\",\"op\":\"add\",\"inputs\":[\"pos\",\"attn\"]},"
    "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"res\"],\"share\":\"wte\"}";

Test(gradients, embedding_attention_tied_head_per_position_loss) {
    fd_check_tokens(gpt_block);
}

/* a position table longer than the context (row 6 unread: a zero gradient, which the
 * finite difference at element 49 checks too) and one init per attention projection */
Test(gradients, position_table_longer_than_the_context) {
    fd_check_tokens(
        "{\"name\":\"wte\",\"op\":\"embedding\",\"inputs\":[\"ids\"],\"vocab\":256,\"dim\":8,"
        "\"init\":{\"std\":0.5}},"
        "{\"name\":\"pos\",\"op\":\"position_embedding\",\"inputs\":[\"wte\"],"
        "\"max_positions\":7,\"init\":{\"std\":0.5}},"
        "{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"pos\"]},"
        "{\"name\":\"attn\",\"op\":\"attention\",\"inputs\":[\"ln\"],\"heads\":2,"
        "\"init\":{\"qkv\":{\"std\":0.5},\"proj\":{\"std\":0.5,\"residual_layers\":2}}},"
        "{\"name\":\"res\",\"op\":\"add\",\"inputs\":[\"pos\",\"attn\"]},"
        "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"res\"],\"share\":\"wte\"}");
}

/* The sample standard deviation of parameter `name`'s initial values. */
static double param_std(ampx_trainer *t, const char *name) {
    for (int p = 0; p < ampx_trainer_n_params(t); p++) {
        if (strcmp(ampx_trainer_param_name(t, p), name)) continue;
        uint64_t n = ampx_trainer_param_size(t, p);
        float *w   = malloc(n * 4);
        cr_assert_eq(ampx_trainer_get(t, p, 0, w), AMPX_OK);
        double s = 0, s2 = 0;
        for (uint64_t i = 0; i < n; i++)
            s += w[i], s2 += (double)w[i] * w[i];
        free(w);
        return sqrt(s2 / (double)n - (s / (double)n) * (s / (double)n));
    }
    cr_assert_fail("no parameter %s", name);
    return 0;
}

/* GPT-2's init: qkv at 0.02, the output projections at 0.02 / sqrt(2 L) (L = 8 here) */
Test(init, per_projection_and_residual_scaling) {
    char json[8192];
    snprintf(
        json, sizeof json, fd_token_fmt,
        "{\"name\":\"wte\",\"op\":\"embedding\",\"inputs\":[\"ids\"],\"vocab\":256,\"dim\":64},"
        "{\"name\":\"attn\",\"op\":\"attention\",\"inputs\":[\"wte\"],\"heads\":2,"
        "\"init\":{\"qkv\":{\"std\":0.02},\"proj\":{\"std\":0.02,\"residual_layers\":8}}},"
        "{\"name\":\"mlp\",\"op\":\"dense\",\"inputs\":[\"attn\"],\"units\":64,"
        "\"init\":{\"weight\":\"normal\",\"std\":0.02,\"residual_layers\":8}},"
        "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"mlp\"],\"share\":\"wte\"}");
    char *path           = write_model(json);
    ampx_model *m        = load(path, NULL);
    ampx_backend *be     = open_cpu();
    ampx_trainer *t      = trainer(m, be);
    double want[3]       = {0.02, 0.02 / 4.0, 0.02 / 4.0};
    const char *names[3] = {"attn.qkv.weight", "attn.proj.weight", "mlp.weight"};
    for (int i = 0; i < 3; i++) {
        double s = param_std(t, names[i]);
        cr_expect(fabs(s - want[i]) < 0.05 * want[i], "%s: std %g, expected %g", names[i], s,
                  want[i]);
    }
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(path);
    free(path);
}

/* The same block with attention as its composite (GEMMs, softmax, permutes), and the fused
 * op with dropout on the probabilities (the mask is fixed for a step, so the loss is smooth
 * around it). */
Test(gradients, composite_attention) {
    char nodes[2048];
    snprintf(nodes, sizeof nodes, "%s", gpt_block);
    char *at = strstr(nodes, "\"heads\":2,");
    cr_assert_not_null(at);
    const char *key = "\"fused\":false,";
    memmove(at + strlen(key), at, strlen(at) + 1);
    memcpy(at, key, strlen(key));
    fd_check_tokens(nodes);
}

Test(gradients, fused_attention_with_dropout) {
    fd_check_model("\"x\":{\"dtype\":\"f32\",\"shape\":[5,4]},\"y\":{\"dtype\":\"i32\","
                   "\"classes\":3}",
                   "{\"name\":\"a\",\"op\":\"attention\",\"inputs\":[\"x\"],\"heads\":2,"
                   "\"dropout\":0.3,\"init\":{\"std\":0.5}},"
                   "{\"name\":\"m\",\"op\":\"mean\",\"inputs\":[\"a\"],\"axis\":0},"
                   "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"m\"],\"units\":3}",
                   fd_xent);
}

Test(gradients, attention_without_mask_on_features) {
    /* 16 features as 4 positions x 4: attention over them, pooled, classified */
    fd_check_model("\"x\":{\"dtype\":\"f32\",\"shape\":[4,4]},\"y\":{\"dtype\":\"i32\","
                   "\"classes\":3}",
                   "{\"name\":\"a\",\"op\":\"attention\",\"inputs\":[\"x\"],\"heads\":2,"
                   "\"causal\":false,\"init\":{\"std\":0.5}},"
                   "{\"name\":\"m\",\"op\":\"mean\",\"inputs\":[\"a\"],\"axis\":0},"
                   "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"m\"],\"units\":3}",
                   fd_xent);
}

/* Changing token t+1 leaves the logits at positions <= t bit for bit unchanged, and changes
 * those after it (so the comparison can fail). */
Test(causality, later_tokens_do_not_change_earlier_logits) {
    char json[8192];
    snprintf(json, sizeof json, fd_token_fmt, gpt_block);
    char *path       = write_model(json);
    ampx_model *m    = load(path, NULL);
    ampx_backend *be = open_cpu();
    ampx_trainer *t  = trainer(m, be);
    int64_t T = ampx_trainer_window(t), V = ampx_trainer_vocab(t);
    cr_assert_eq(T, 6);
    cr_assert_eq(V, 256);
    float *a = malloc(sizeof(float) * (size_t)(T * V)),
          *b = malloc(sizeof(float) * (size_t)(T * V));
    for (int64_t pos = 0; pos + 1 < T; pos++) {
        int32_t ids[6] = {104, 101, 108, 108, 111, 32}, other[6];
        memcpy(other, ids, sizeof ids);
        other[pos + 1] = 122;
        cr_assert_eq(ampx_trainer_logits(t, ids, 1, a), AMPX_OK, "%s", ampx_trainer_error(t));
        cr_assert_eq(ampx_trainer_logits(t, other, 1, b), AMPX_OK, "%s", ampx_trainer_error(t));
        cr_expect(!memcmp(a, b, sizeof(float) * (size_t)((pos + 1) * V)),
                  "logits at positions <= %lld changed with token %lld", (long long)pos,
                  (long long)pos + 1);
        cr_expect(memcmp(a + (pos + 1) * V, b + (pos + 1) * V, sizeof(float) * (size_t)V),
                  "position %lld's logits ignore its own token", (long long)pos + 1);
    }
    free(a), free(b);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(path);
    free(path);
}

/* The KV cache: the logits of the last position of every window length, computed through
 * ampx_trainer_logits_last one new position at a time after the first, bit for bit those of
 * the whole forward, with attention fused and as its composite, in f32 and mixed bf16; and a
 * window changed at one position recomputes from there. */
static void kv_check(const char *policy, int fused, int window) {
    char json[8192], nodes[2048];
    /* two blocks: the second's keys and values come from the first's attention */
    snprintf(nodes, sizeof nodes, "%s", gpt_block);
    char *head = strstr(nodes, "{\"name\":\"out\"");
    cr_assert_not_null(head);
    snprintf(head, sizeof nodes - (size_t)(head - nodes),
             "{\"name\":\"ln2\",\"op\":\"layernorm\",\"inputs\":[\"res\"]},"
             "{\"name\":\"attn2\",\"op\":\"attention\",\"inputs\":[\"ln2\"],\"heads\":2,"
             "\"init\":{\"std\":0.5}},"
             "{\"name\":\"res2\",\"op\":\"add\",\"inputs\":[\"res\",\"attn2\"]},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"res2\"],\"share\":\"wte\"}");
    for (char *h = nodes; !fused && (h = strstr(h, "\"heads\":2,"));) {
        /* the composite: "fused":false on the attention nodes */
        const char *key = "\"fused\":false,";
        memmove(h + strlen(key), h, strlen(h) + 1);
        memcpy(h, key, strlen(key));
        h += strlen(key) + 1;
    }
    const char *attention = fused ? "attention=1" : "attention=0";
    snprintf(json, sizeof json, fd_token_fmt, nodes);
    for (char *sh = json; (sh = strstr(sh, "\"shape\":[6]"));) { /* the window */
        char rest[8192];
        snprintf(rest, sizeof rest, "%s", sh + strlen("\"shape\":[6]"));
        sh += snprintf(sh, sizeof json - (size_t)(sh - json), "\"shape\":[%d]", window);
        snprintf(sh, sizeof json - (size_t)(sh - json), "%s", rest);
    }
    char *at = strstr(json, "\"policy\":\"f32\"");
    cr_assert_not_null(at);
    char tail[8192];
    snprintf(tail, sizeof tail, "%s", at + strlen("\"policy\":\"f32\""));
    snprintf(at, sizeof json - (size_t)(at - json), "\"policy\":\"%s\"%s", policy, tail);
    char *path       = write_model(json);
    ampx_model *m    = load(path, NULL);
    ampx_backend *be = NULL;
    char err[512];
    const char *opts[2] = {"threads=2", attention};
    cr_assert_eq(ampx_backend_open(AMPX_TEST_CPU_PLUGIN, opts, 2, &be, err, sizeof err), AMPX_OK,
                 "%s", err);
    ampx_trainer *t = trainer(m, be);
    const char *why = NULL;
    cr_assert(ampx_trainer_cache(t, &why), "no cache: %s", why);
    int64_t T = ampx_trainer_window(t), V = ampx_trainer_vocab(t);
    float *all = malloc(sizeof(float) * (size_t)(T * V));
    cr_assert_eq(T, window);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)T), *full = malloc(sizeof(int32_t) * (size_t)T);
    for (int64_t i = 0; i < T; i++)
        ids[i] = (int32_t)("hello there, general kenobi. "[i % 29]);
    float *chain = malloc(sizeof(float) * (size_t)(T * V));
    for (int round = 0; round < 3; round++) {
        /* rounds 1 and 2 differ from position 2 on; round 2 runs positions 3.. at once */
        if (round) ids[2] = round == 1 ? 122 : 120;
        for (int64_t len = round == 2 ? 3 : 1; len <= T; len += round == 2 ? T - 3 : 1)
            cr_assert_eq(ampx_trainer_logits_last(t, ids, len, chain + (len - 1) * V), AMPX_OK,
                         "%s", ampx_trainer_error(t));
        for (int64_t len = round == 2 ? T : 1; len <= T; len++) {
            memcpy(full, ids, sizeof(int32_t) * (size_t)len);
            memset(full + len, 0, sizeof(int32_t) * (size_t)(T - len));
            cr_assert_eq(ampx_trainer_logits(t, full, 1, all), AMPX_OK, "%s",
                         ampx_trainer_error(t));
            cr_expect(
                !memcmp(chain + (len - 1) * V, all + (len - 1) * V, sizeof(float) * (size_t)V),
                "%s, %s, round %d: the cached logits at position %lld differ (%g vs %g)", policy,
                attention, round, (long long)len - 1, (double)chain[(len - 1) * V],
                (double)all[(len - 1) * V]);
        }
    }
    free(chain), free(ids), free(full);
    free(all);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(path);
    free(path);
}

Test(kvcache, f32_fused) {
    kv_check("f32", 1, 6);
}
Test(kvcache, f32_composite) {
    kv_check("f32", 0, 6);
}
Test(kvcache, bf16_fused) {
    kv_check("mixed_bf16", 1, 6);
}
Test(kvcache, bf16_composite) {
    kv_check("mixed_bf16", 0, 6);
}
/* three query tiles of the cpu kernel: the new rows' tile alone is computed */
Test(kvcache, bf16_fused_long) {
    kv_check("mixed_bf16", 1, 70);
}
Test(kvcache, f32_composite_long) {
    kv_check("f32", 0, 70);
}

Test(gradients, dense_tanh) {
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":8,\"init\":{\"bias\":"
             "\"he_uniform\"}},"
             "{\"name\":\"a\",\"op\":\"tanh\",\"inputs\":[\"h\"]},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"a\"],\"units\":3}");
}
Test(gradients, gelu_sigmoid_silu) {
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":8},"
             "{\"name\":\"a\",\"op\":\"gelu\",\"inputs\":[\"h\"]},"
             "{\"name\":\"h2\",\"op\":\"dense\",\"inputs\":[\"a\"],\"units\":8},"
             "{\"name\":\"b\",\"op\":\"sigmoid\",\"inputs\":[\"h2\"]},"
             "{\"name\":\"h3\",\"op\":\"dense\",\"inputs\":[\"b\"],\"units\":8},"
             "{\"name\":\"c\",\"op\":\"silu\",\"inputs\":[\"h3\"]},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"c\"],\"units\":3}");
}
Test(gradients, relu) {
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":8,\"init\":{\"bias\":"
             "\"ones\"}},"
             "{\"name\":\"a\",\"op\":\"relu\",\"inputs\":[\"h\"]},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"a\"],\"units\":3}");
}
Test(gradients, layernorm) {
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":8},"
             "{\"name\":\"n\",\"op\":\"layernorm\",\"inputs\":[\"h\"],\"init\":{\"weight\":\"he_"
             "uniform\",\"bias\":\"he_uniform\"}},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"n\"],\"units\":3}");
}
Test(gradients, residual_add_two_consumers) {
    /* h feeds both the branch and the add: its gradient has two contributions */
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":8},"
             "{\"name\":\"a\",\"op\":\"tanh\",\"inputs\":[\"h\"]},"
             "{\"name\":\"b\",\"op\":\"dense\",\"inputs\":[\"a\"],\"units\":8},"
             "{\"name\":\"r\",\"op\":\"add\",\"inputs\":[\"h\",\"b\"]},"
             "{\"name\":\"s\",\"op\":\"sigmoid\",\"inputs\":[\"r\"]},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"s\"],\"units\":3}");
}
Test(gradients, dense_input_used_twice) {
    /* one activation read by two dense layers: dx accumulates in the second GEMM */
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":8},"
             "{\"name\":\"a\",\"op\":\"tanh\",\"inputs\":[\"h\"]},"
             "{\"name\":\"p\",\"op\":\"dense\",\"inputs\":[\"a\"],\"units\":3},"
             "{\"name\":\"q\",\"op\":\"dense\",\"inputs\":[\"a\"],\"units\":3},"
             "{\"name\":\"out\",\"op\":\"add\",\"inputs\":[\"p\",\"q\"]}");
}

Test(gradients, batchnorm_over_features) {
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":8},"
             "{\"name\":\"n\",\"op\":\"batchnorm\",\"inputs\":[\"h\"],\"momentum\":0.2,"
             "\"init\":{\"weight\":\"he_uniform\",\"bias\":\"he_uniform\"}},"
             "{\"name\":\"a\",\"op\":\"tanh\",\"inputs\":[\"n\"]},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"a\"],\"units\":3}");
}
Test(gradients, softmax_mul_scale) {
    /* a gate: h * softmax(2 g), then scaled */
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":6},"
             "{\"name\":\"g\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":6},"
             "{\"name\":\"p\",\"op\":\"softmax\",\"inputs\":[\"g\"],\"scale\":2},"
             "{\"name\":\"m\",\"op\":\"mul\",\"inputs\":[\"h\",\"p\"]},"
             "{\"name\":\"s\",\"op\":\"scale\",\"inputs\":[\"m\"],\"factor\":3},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"s\"],\"units\":3}");
}
Test(gradients, log_softmax) {
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":6},"
             "{\"name\":\"p\",\"op\":\"softmax\",\"inputs\":[\"h\"],\"log\":true},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"p\"],\"units\":3}");
}
Test(gradients, nd_reshape_transpose_reduce) {
    /* [4] -> [2, 2] -> dense over the last axis [2, 6] -> layernorm -> transpose [6, 2] ->
     * mean over axis 0 [2], and the sum over the last axis [6] of the same transpose. (The
     * second row holds the data's near-zero distractor features: a random bias keeps its
     * variance away from 0, where layer norm is too curved for a finite difference.) */
    fd_check("{\"name\":\"r\",\"op\":\"reshape\",\"inputs\":[\"x\"],\"shape\":[2,-1]},"
             "{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"r\"],\"units\":6,"
             "\"init\":{\"bias\":\"he_uniform\"}},"
             "{\"name\":\"n\",\"op\":\"layernorm\",\"inputs\":[\"h\"],\"init\":{\"weight\":"
             "\"he_uniform\",\"bias\":\"he_uniform\"}},"
             "{\"name\":\"a\",\"op\":\"tanh\",\"inputs\":[\"n\"]},"
             "{\"name\":\"t\",\"op\":\"transpose\",\"inputs\":[\"a\"]},"
             "{\"name\":\"m\",\"op\":\"mean\",\"inputs\":[\"t\"],\"axis\":0},"
             "{\"name\":\"s\",\"op\":\"sum\",\"inputs\":[\"t\"],\"axis\":-1},"
             "{\"name\":\"ms\",\"op\":\"dense\",\"inputs\":[\"s\"],\"units\":2},"
             "{\"name\":\"c\",\"op\":\"add\",\"inputs\":[\"m\",\"ms\"]},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"c\"],\"units\":3}");
}
/* Convolutions lower to im2col, a (grouped) matmul and a transpose; their backward is
 * col2im and the grouped weight-gradient GEMM. [4] -> dense 48 -> [3, 4, 4] -> conv 3x2,
 * stride 2x1, padding 1x0, dilation 1x2 -> [4, 2, 2] -> conv 2x2 in 2 groups, padded, tanh ->
 * [4, 3, 3] -> average pool 2x2 stride 1, padded, the padding not counted -> [4, 4, 4]. */
Test(gradients, conv2d_strides_dilation_groups_avgpool) {
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":48},"
             "{\"name\":\"r\",\"op\":\"reshape\",\"inputs\":[\"h\"],\"shape\":[3,4,4]},"
             "{\"name\":\"c1\",\"op\":\"conv2d\",\"inputs\":[\"r\"],\"filters\":4,"
             "\"kernel\":[3,2],\"stride\":[2,1],\"padding\":[1,0],\"dilation\":[1,2],"
             "\"init\":{\"bias\":\"he_uniform\"}},"
             "{\"name\":\"c2\",\"op\":\"conv2d\",\"inputs\":[\"c1\"],\"filters\":4,\"kernel\":2,"
             "\"padding\":1,\"groups\":2,\"activation\":\"tanh\",\"init\":{\"bias\":"
             "\"he_uniform\"}},"
             "{\"name\":\"p\",\"op\":\"avgpool2d\",\"inputs\":[\"c2\"],\"kernel\":2,\"stride\":1,"
             "\"padding\":1,\"count_padding\":false},"
             "{\"name\":\"f\",\"op\":\"flatten\",\"inputs\":[\"p\"]},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"f\"],\"units\":3}");
}

/* Max pooling routes each window's gradient to its largest pixel; concat along the channels
 * and along the width (one value twice, so its gradients add), then the mean of each
 * channel. The step is small enough that no window's largest pixel changes (at 1e-2, three
 * of h.bias's eight differences cross a tie). */
Test(gradients, maxpool_concat_global_avgpool) {
    fd_step = 1e-3;
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":32},"
             "{\"name\":\"r\",\"op\":\"reshape\",\"inputs\":[\"h\"],\"shape\":[2,4,4]},"
             "{\"name\":\"t\",\"op\":\"tanh\",\"inputs\":[\"r\"]},"
             "{\"name\":\"p\",\"op\":\"maxpool2d\",\"inputs\":[\"t\"],\"kernel\":2},"
             "{\"name\":\"c\",\"op\":\"conv2d\",\"inputs\":[\"t\"],\"filters\":3,\"kernel\":3,"
             "\"stride\":2,\"padding\":1,\"bias\":false},"
             "{\"name\":\"k\",\"op\":\"concat\",\"inputs\":[\"p\",\"c\"]},"
             "{\"name\":\"w\",\"op\":\"concat\",\"inputs\":[\"k\",\"k\"],\"axis\":-1},"
             "{\"name\":\"g\",\"op\":\"global_avgpool\",\"inputs\":[\"w\"]},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"g\"],\"units\":3}");
}

Test(gradients, dropout_in_training) {
    /* the mask is fixed for a step, so the loss is smooth in the weights around it */
    fd_check("{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":16},"
             "{\"name\":\"a\",\"op\":\"tanh\",\"inputs\":[\"h\"]},"
             "{\"name\":\"d\",\"op\":\"dropout\",\"inputs\":[\"a\"],\"rate\":0.3},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"d\"],\"units\":3}");
}
Test(gradients, nd_input_and_batchnorm_per_channel) {
    /* a [2, 2] input: batch norm over the batch and the last axis, per channel of axis 0 */
    fd_check_model(
        "\"x\":{\"dtype\":\"f32\",\"shape\":[2,2]},\"y\":{\"dtype\":\"i32\",\"classes\":3}",
        "{\"name\":\"h\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":5},"
        "{\"name\":\"n\",\"op\":\"batchnorm\",\"inputs\":[\"h\"],\"axis\":0,"
        "\"init\":{\"weight\":\"he_uniform\",\"bias\":\"he_uniform\"}},"
        "{\"name\":\"f\",\"op\":\"reshape\",\"inputs\":[\"n\"],\"shape\":[10]},"
        "{\"name\":\"a\",\"op\":\"silu\",\"inputs\":[\"f\"]},"
        "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"a\"],\"units\":3}",
        fd_xent);
}
Test(gradients, shared_parameters_get_one_gradient) {
    /* "b" uses "a"'s weight and bias: both uses add into one gradient */
    fd_check("{\"name\":\"a\",\"op\":\"dense\",\"inputs\":[\"x\"],\"units\":4},"
             "{\"name\":\"t\",\"op\":\"tanh\",\"inputs\":[\"a\"]},"
             "{\"name\":\"b\",\"op\":\"dense\",\"inputs\":[\"t\"],\"units\":4,"
             "\"share\":\"a\"},"
             "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"b\"],\"units\":3}");
}
Test(gradients, two_inputs_and_mse) {
    /* two f32 inputs take the features in order; the target is the one-hot class code */
    fd_check_model(
        "\"p\":{\"dtype\":\"f32\",\"shape\":[2]},\"q\":{\"dtype\":\"f32\",\"shape\":[2]},"
        "\"t\":{\"dtype\":\"f32\",\"shape\":[3]}",
        "{\"name\":\"hp\",\"op\":\"dense\",\"inputs\":[\"p\"],\"units\":5},"
        "{\"name\":\"hq\",\"op\":\"dense\",\"inputs\":[\"q\"],\"units\":5},"
        "{\"name\":\"h\",\"op\":\"add\",\"inputs\":[\"hp\",\"hq\"]},"
        "{\"name\":\"a\",\"op\":\"gelu\",\"inputs\":[\"h\"]},"
        "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"a\"],\"units\":3}",
        "{\"type\":\"mse\",\"predictions\":\"out\",\"targets\":\"t\"}");
}

// ---------------------------------------------------------------------------------------
// The scaler: the device op against an independent model of PyTorch's GradScaler
// (torch._amp_update_scale_), extended as docs/TRAINING.md says with hysteresis and bounds.

typedef struct model_scaler {
    double scale;
    int tracker, hyst_left, stopped;
} model_scaler;

static void model_update(model_scaler *s, int found_inf, double growth, double backoff,
                         int interval, int hysteresis, double min_scale, double max_scale,
                         int on_min_error) {
    if (found_inf) {
        s->tracker = 0;
        if (--s->hyst_left <= 0) {
            s->scale     = fmax((double)(float)(s->scale * backoff), min_scale);
            s->hyst_left = hysteresis;
        }
        if (on_min_error && s->scale <= min_scale) s->stopped = 1;
    } else if (++s->tracker >= interval) {
        double next = (double)(float)(s->scale * growth);
        if (isfinite(next) && next <= max_scale) s->scale = next;
        s->tracker = 0;
    }
}

typedef struct scaler_case {
    const char *pattern; /* per step: '.' applied, 'X' overflow */
    int interval, hysteresis;
    float min_scale, max_scale;
    int on_min_error;
} scaler_case;

Test(scaler, trajectories_match_the_pytorch_model) {
    static const scaler_case cases[] = {
        {"..X...X..XX....", 3, 1, 0, INFINITY, 0}, /* PyTorch parity: growth and backoff */
        {"........................", 2, 1, 0, 4194304.0f, 0},   /* max_scale bound */
        {"XXXXXXXXXXXXXXXXXXXXXX", 2000, 1, 1024, INFINITY, 0}, /* min_scale bound, skip */
        {"XXXXXXXXXX", 2000, 1, 4096, INFINITY, 1},             /* on_min_scale error */
        {"X.X.XX.XXX..", 2, 2, 0, INFINITY, 0},                 /* hysteresis 2 */
        {".X.X.X.X", 3, 3, 0, INFINITY, 0},                     /* hysteresis 3 */
    };
    ampx_backend *be              = open_cpu();
    const ampx_backend_iface *ifc = ampx_backend_iface_of(be);
    ampx_context *ctx             = ampx_backend_context(be);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const scaler_case *k = &cases[c];
        ampx_scalars s       = {.scale              = 65536,
                                .hysteresis_left    = k->hysteresis,
                                .mode               = AMPX_SCALER_DYNAMIC,
                                .growth_factor      = 2,
                                .backoff_factor     = 0.5f,
                                .growth_interval    = k->interval,
                                .hysteresis         = k->hysteresis,
                                .min_scale          = k->min_scale,
                                .max_scale          = k->max_scale,
                                .on_min_scale_error = k->on_min_error};
        model_scaler ms      = {.scale = 65536, .hyst_left = k->hysteresis};
        ampx_buffer *b;
        cr_assert_eq(ifc->buffer_alloc(ctx, sizeof s, &b), AMPX_OK);
        cr_assert_eq(ifc->buffer_write(ctx, b, 0, &s, sizeof s), AMPX_OK);
        ampx_scaler_update_args u = {.size = sizeof u, .scalars = {.buf = b, .dtype = AMPX_F32}};
        for (const char *p = k->pattern; *p; p++) {
            int inf = *p == 'X';
            /* as unscale_check would: OR the step's flag into found_inf */
            ampx_scalars cur;
            ifc->buffer_read(ctx, b, 0, &cur, sizeof cur);
            cur.found_inf |= inf;
            ifc->buffer_write(ctx, b, 0, &cur, sizeof cur);
            cr_assert_eq(ifc->ops->scaler_update(ctx, &u), AMPX_OK);
            ifc->buffer_read(ctx, b, 0, &cur, sizeof cur);
            model_update(&ms, inf, 2, 0.5, k->interval, k->hysteresis, k->min_scale, k->max_scale,
                         k->on_min_error);
            cr_expect_eq((double)cur.scale, ms.scale, "case %zu step %ld: scale %g, expected %g", c,
                         (long)(p - k->pattern + 1), (double)cur.scale, ms.scale);
            cr_expect_eq(!!(cur.stop_reason & AMPX_STOP_MIN_SCALE), ms.stopped,
                         "case %zu step %ld: stop", c, (long)(p - k->pattern + 1));
        }
        ifc->buffer_free(ctx, b);
    }
    ampx_backend_close(be);
}

// ---------------------------------------------------------------------------------------
// Skipped steps, accuracy parity, resume

static char *mlp_path(void) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/models/mlp.json", AMPX_SOURCE_DIR);
    return p;
}

static float *snapshot(ampx_trainer *t) {
    uint64_t total = 0;
    for (int p = 0; p < ampx_trainer_n_params(t); p++)
        total += ampx_trainer_param_size(t, p) * 3;
    float *all = malloc(total * 4), *at = all;
    for (int p = 0; p < ampx_trainer_n_params(t); p++)
        for (int what = 0; what < 4; what++) {
            if (what == 1) continue; /* gradients are not state */
            cr_assert_eq(ampx_trainer_get(t, p, what, at), AMPX_OK);
            at += ampx_trainer_param_size(t, p);
        }
    return all;
}

Test(skip, injected_nonfinite_gradient_is_skipped_and_training_recovers) {
    ampx_model *m                         = load(mlp_path(), NULL);
    ampx_model_train_config(m)->log_every = 1;
    ampx_backend *be                      = open_cpu();
    ampx_trainer *t                       = trainer(m, be);
    cr_assert_eq(ampx_trainer_run(t, 30, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    ampx_scalars before, after;
    ampx_trainer_scalars(t, &before);
    float *s0 = snapshot(t);
    ampx_trainer_inject_nonfinite(t, 31, 2);
    cr_assert_eq(ampx_trainer_run(t, 31, NULL, NULL), AMPX_OK);
    float *s1      = snapshot(t);
    uint64_t total = 0;
    for (int p = 0; p < ampx_trainer_n_params(t); p++)
        total += ampx_trainer_param_size(t, p) * 3;
    cr_expect_eq(memcmp(s0, s1, total * 4), 0,
                 "parameters or optimizer state changed on a skipped step");
    ampx_trainer_scalars(t, &after);
    cr_expect_eq(after.scale, before.scale * 0.5f);
    cr_expect_eq(after.applied_steps, before.applied_steps);
    cr_expect_eq(after.skipped_steps, before.skipped_steps + 1);
    cr_expect_eq(after.lr, before.lr, "the schedule advanced on a skipped step");
    cr_assert_eq(ampx_trainer_run(t, 1500, NULL, NULL), AMPX_OK);
    ampx_eval_result ev;
    cr_assert_eq(ampx_trainer_evaluate(t, &ev), AMPX_OK);
    cr_expect_gt(ev.accuracy, 0.9, "accuracy %.3f after recovering", ev.accuracy);
    free(s0), free(s1);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
}

/* The call layer's counts: every step of a model issues the same ops (its nodes' and the
 * step's own), ampx_trainer_ops_issued grows by them, and what a run issues outside its steps
 * (the flush's weights check) does not depend on how many steps it ran. */
Test(ops, issued_grows_by_each_steps_ops) {
    ampx_model *m                             = load(mlp_path(), NULL);
    ampx_model_train_config(m)->log_every     = 100; /* one flush per run below */
    ampx_model_train_config(m)->monitor_every = 0;
    ampx_backend *be                          = open_cpu();
    ampx_trainer *t                           = trainer(m, be);
    uint64_t created                          = ampx_trainer_ops_issued(t);
    cr_expect_gt(created, 0, "creating issues ops (the backend's self-check, the copies' casts)");
    cr_expect_eq(ampx_trainer_last_step_ops(t), 0, "no step ran yet");
    cr_assert_eq(ampx_trainer_run(t, 1, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    uint64_t one = ampx_trainer_last_step_ops(t), after_one = ampx_trainer_ops_issued(t);
    /* the forward and backward nodes, unscale_check, sum_squares, the optimizer, the scaler */
    cr_expect_geq(one, 4 + 2 * 3, "a step issued %llu ops", (unsigned long long)one);
    cr_expect_geq(after_one - created, one);
    cr_assert_eq(ampx_trainer_run(t, 5, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    uint64_t last = ampx_trainer_last_step_ops(t), after_five = ampx_trainer_ops_issued(t);
    cr_expect_eq(last, one, "step 5 issued %llu ops, step 1 %llu", (unsigned long long)last,
                 (unsigned long long)one);
    cr_expect_eq(after_five - after_one - 4 * last, after_one - created - one,
                 "the ops outside the steps of a run depend on its steps' count");
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
}

static double accuracy_with(const char *policy_json) {
    char *pp         = write_model(policy_json);
    ampx_model *m    = load(mlp_path(), pp);
    ampx_backend *be = open_cpu();
    ampx_trainer *t  = trainer(m, be);
    cr_assert_eq(ampx_trainer_run(t, ampx_model_train_config(m)->steps, NULL, NULL), AMPX_OK, "%s",
                 ampx_trainer_error(t));
    ampx_eval_result ev;
    cr_assert_eq(ampx_trainer_evaluate(t, &ev), AMPX_OK);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(pp);
    free(pp);
    return ev.accuracy;
}

Test(parity, bf16_and_f16_reach_the_f32_accuracy, .timeout = 900) {
    double f32  = accuracy_with("{\"policy\":\"f32\",\"scaler\":\"none\"}");
    double bf16 = accuracy_with("{\"policy\":\"mixed_bf16\",\"scaler\":{\"type\":\"dynamic\"}}");
    double f16  = accuracy_with("{\"policy\":\"mixed_f16\",\"scaler\":{\"type\":\"dynamic\",\"init_"
                                 "scale\":16777216,\"growth_interval\":100}}");
    cr_expect_gt(f32, 0.9, "f32 accuracy %.4f", f32);
    cr_expect_geq(bf16, f32 - 0.01, "bf16 %.4f vs f32 %.4f", bf16, f32);
    cr_expect_geq(f16, f32 - 0.01, "f16 %.4f vs f32 %.4f", f16, f32);
}

static unsigned char *slurp(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)*len);
    cr_assert_eq(fread(b, 1, (size_t)*len, f), (size_t)*len);
    fclose(f);
    return b;
}

static void run_to(const char *resume, int64_t steps, const char *save) {
    ampx_model *m                         = load(mlp_path(), NULL);
    ampx_model_train_config(m)->log_every = 7;
    ampx_backend *be                      = open_cpu();
    ampx_trainer *t                       = trainer(m, be);
    char err[1024];
    if (resume) cr_assert_eq(ampx_trainer_load(t, resume, err, sizeof err), AMPX_OK, "%s", err);
    cr_assert_eq(ampx_trainer_run(t, steps, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    cr_assert_eq(ampx_trainer_save(t, save, err, sizeof err), AMPX_OK, "%s", err);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
}

Test(resume, twenty_plus_twenty_equals_forty_bit_for_bit) {
    char dir[] = "/tmp/ampx_resume_XXXXXX";
    cr_assert(mkdtemp(dir));
    char straight[128], half[128], resumed[128];
    snprintf(straight, sizeof straight, "%s/straight.safetensors", dir);
    snprintf(half, sizeof half, "%s/half.safetensors", dir);
    snprintf(resumed, sizeof resumed, "%s/resumed.safetensors", dir);
    run_to(NULL, 40, straight);
    run_to(NULL, 20, half);
    run_to(half, 40, resumed);
    long la, lb;
    unsigned char *a = slurp(straight, &la), *b = slurp(resumed, &lb);
    cr_assert_eq(la, lb);
    cr_expect_eq(memcmp(a, b, (size_t)la), 0, "a resumed run differs from a straight one");
    unsigned char *h = slurp(half, &lb);
    cr_expect_neq(memcmp(a, h, (size_t)(la < lb ? la : lb)), 0,
                  "20 and 40 steps gave the same file");
    free(a), free(b), free(h);
    unlink(straight), unlink(half), unlink(resumed), rmdir(dir);
}

// ---------------------------------------------------------------------------------------
// Gradient accumulation and clipping, with plain SGD so the update is lr * gradient.

static const char *sgd_fmt =
    "{\"name\":\"acc\",\"inputs\":{\"x\":{\"dtype\":\"f32\",\"shape\":[2]},"
    "\"y\":{\"dtype\":\"i32\",\"classes\":3}},\"layers\":[{\"type\":\"dense\",\"units\":16,"
    "\"activation\":\"tanh\"},{\"type\":\"dense\",\"units\":3}],\"policy\":\"f32\","
    "\"scaler\":\"none\",\"optimizer\":{\"type\":\"sgd\",\"lr\":%g,\"clip_grad_norm\":%g},"
    "\"data\":{\"samples\":1000},\"train\":{\"batch\":%d,\"accumulate\":%d,\"steps\":10}}";

/* The parameters after `steps` steps, concatenated. */
static float *params_after(double lr, double clip, int batch, int accumulate, int steps,
                           uint64_t *total) {
    char json[2048];
    snprintf(json, sizeof json, sgd_fmt, lr, clip, batch, accumulate);
    char *path       = write_model(json);
    ampx_model *m    = load(path, NULL);
    ampx_backend *be = open_cpu();
    ampx_trainer *t  = trainer(m, be);
    if (steps)
        cr_assert_eq(ampx_trainer_run(t, steps, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    *total = 0;
    for (int p = 0; p < ampx_trainer_n_params(t); p++)
        *total += ampx_trainer_param_size(t, p);
    float *all = malloc(*total * 4), *at = all;
    for (int p = 0; p < ampx_trainer_n_params(t); p++) {
        cr_assert_eq(ampx_trainer_get(t, p, 0, at), AMPX_OK);
        at += ampx_trainer_param_size(t, p);
    }
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(path);
    free(path);
    return all;
}

Test(optimizer, accumulating_two_half_batches_equals_one_full_batch) {
    uint64_t n;
    float *w0    = params_after(0.5, 0, 64, 1, 0, &n);
    float *a     = params_after(0.5, 0, 64, 1, 1, &n);
    float *b     = params_after(0.5, 0, 32, 2, 1, &n);
    double moved = 0, diff = 0;
    for (uint64_t i = 0; i < n; i++) {
        moved = fmax(moved, fabs((double)a[i] - w0[i]));
        diff  = fmax(diff, fabs((double)a[i] - b[i]));
    }
    cr_assert_gt(moved, 1e-4, "the step did not move the parameters");
    cr_expect_lt(diff, 1e-6, "accumulated update differs by %g (update size %g)", diff, moved);
    free(w0), free(a), free(b);
}

Test(optimizer, clipping_bounds_the_update_by_the_global_norm) {
    uint64_t n;
    float *w0 = params_after(1.0, 0, 64, 1, 0, &n);
    float *c  = params_after(1.0, 1e-3, 64, 1, 1, &n);
    float *u  = params_after(1.0, 0, 64, 1, 1, &n);
    double dc = 0, du = 0;
    for (uint64_t i = 0; i < n; i++) {
        dc += ((double)c[i] - w0[i]) * ((double)c[i] - w0[i]);
        du += ((double)u[i] - w0[i]) * ((double)u[i] - w0[i]);
    }
    dc = sqrt(dc), du = sqrt(du);
    cr_expect_gt(du, 1e-2, "unclipped update %g", du);
    cr_expect(fabs(dc - 1e-3) < 1e-5, "clipped update norm %g, expected 1e-3", dc);
    free(w0), free(c), free(u);
}

// ---------------------------------------------------------------------------------------
// Hostile model files: thousands of mutations of mlp.json. Each load either succeeds or
// fails with one line that starts with the file name; none crashes (the sanitizer build
// runs this too).

Test(fuzz, mutated_model_files_fail_cleanly) {
    long len;
    unsigned char *orig = slurp(mlp_path(), &len);
    char *path          = write_model("");
    uint32_t state      = 12345;
    int failures = 0, loads = 0;
    for (int iter = 0; iter < 3000; iter++) {
        unsigned char *buf = malloc((size_t)len + 1);
        memcpy(buf, orig, (size_t)len);
        long n = len;
        for (int k = 0; k < 1 + iter % 3 && n > 0; k++) {
            state                        = state * 1664525u + 1013904223u;
            long at                      = (long)((state >> 8) % (uint32_t)n);
            int kind                     = (int)(state % 4);
            static const char alphabet[] = "{}[]\":,0123456789-.eE truefalsn\\\n";
            if (kind == 0)
                buf[at] = (unsigned char)alphabet[(state >> 3) % (sizeof alphabet - 1)];
            else if (kind == 1)
                n = at; /* truncate */
            else if (kind == 2 && n > 1)
                memmove(buf + at, buf + at + 1, (size_t)(n - at - 1)), n--;
            else
                buf[at] = (unsigned char)(state >> 16); /* any byte */
        }
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, (size_t)n, f);
        fclose(f);
        ampx_model *m = NULL;
        char err[1024];
        if (ampx_model_load(path, NULL, &m, err, sizeof err) == AMPX_OK) {
            loads++;
            ampx_model_free(m);
        } else {
            failures++;
            cr_assert(!strncmp(err, path, strlen(path)), "message does not name the file: %s", err);
            cr_assert(!strchr(err, '\n'), "message has more than one line: %s", err);
        }
        free(buf);
    }
    cr_expect_gt(failures, 2000, "only %d of 3000 mutations were refused", failures);
    unlink(path);
    free(path);
    free(orig);
}

// ---------------------------------------------------------------------------------------
// In-memory data (ampx_model_set_data): a program's own rows train the model, and its bad
// rows are refused with the row and column.

static const char *xor_json =
    "{\"name\":\"xor\",\"inputs\":{\"x\":{\"dtype\":\"f32\",\"shape\":[2]},"
    "\"y\":{\"dtype\":\"i32\",\"classes\":2}},\"layers\":[{\"name\":\"h\",\"type\":\"dense\","
    "\"units\":32,\"activation\":\"relu\"},{\"name\":\"out\",\"type\":\"dense\",\"units\":2}],"
    "\"loss\":{\"type\":\"softmax_cross_entropy\",\"logits\":\"out\",\"labels\":\"y\"},"
    "\"policy\":\"mixed_bf16\",\"scaler\":\"dynamic\",\"optimizer\":{\"type\":\"adamw\","
    "\"lr\":0.01},\"train\":{\"steps\":400,\"batch\":32,\"seed\":1,\"log_every\":50}}";

/* n rows of the quadrant task: class 1 where x0 x1 > 0 (flip: the other class). */
static void xor_rows(float *x, int32_t *y, int64_t n, uint32_t seed, int flip) {
    for (int64_t i = 0; i < n; i++) {
        for (int c = 0; c < 2; c++) {
            seed         = seed * 1664525u + 1013904223u;
            x[2 * i + c] = (float)(seed >> 8) / 8388608.0f - 1.0f;
        }
        y[i] = (x[2 * i] * x[2 * i + 1] > 0) != flip;
    }
}

static double xor_accuracy(const ampx_memory_data *d) {
    char *path       = write_model(xor_json);
    ampx_model *m    = load(path, NULL);
    ampx_backend *be = open_cpu();
    cr_assert_eq(ampx_model_set_data(m, d), AMPX_OK);
    ampx_trainer *t = trainer(m, be);
    cr_assert_eq(ampx_trainer_run(t, 400, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    ampx_eval_result ev;
    cr_assert_eq(ampx_trainer_evaluate(t, &ev), AMPX_OK);
    cr_expect_eq(ev.examples, d->n_test);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(path), free(path);
    return ev.accuracy;
}

Test(memory_data, trains_on_the_callers_rows) {
    enum { NTR = 2000, NTE = 500 };
    static float xtr[2 * NTR], xte[2 * NTE];
    static int32_t ytr[NTR], yte[NTE], yflip[NTE];
    xor_rows(xtr, ytr, NTR, 7, 0);
    xor_rows(xte, yte, NTE, 99, 0);
    xor_rows(xte, yflip, NTE, 99, 1);
    ampx_memory_data d = {NTR, NTE, 2, xtr, xte, ytr, yte};
    double acc         = xor_accuracy(&d);
    cr_expect_gt(acc, 0.9, "accuracy %.3f on the caller's held-out rows", acc);
    /* the same training, held-out labels flipped: the evaluation reads the caller's rows */
    d.y_test       = yflip;
    double flipped = xor_accuracy(&d);
    cr_expect_lt(flipped, 0.1, "accuracy %.3f against flipped held-out labels", flipped);
}

static void expect_refused(const ampx_memory_data *d, const char *want) {
    char *path       = write_model(xor_json);
    ampx_model *m    = load(path, NULL);
    ampx_backend *be = open_cpu();
    cr_assert_eq(ampx_model_set_data(m, d), AMPX_OK);
    ampx_trainer *t = NULL;
    char err[512]   = "";
    cr_expect_neq(ampx_trainer_create(m, be, &t, err, sizeof err), AMPX_OK, "%s was accepted",
                  want);
    cr_expect(strstr(err, want) != NULL, "'%s' does not say '%s'", err, want);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(path), free(path);
}

Test(memory_data, bad_rows_are_named) {
    float x[2 * 64];
    int32_t y[64];
    xor_rows(x, y, 64, 3, 0);
    ampx_memory_data d = {64, 16, 2, x, x + 2 * 48, y, y + 48};
    x[2 * 5 + 1]       = NAN;
    expect_refused(&d, "x_train row 5 column 1 is nan, expected a finite number");
    x[2 * 5 + 1] = 0.5f;
    d.n_train    = 48;
    y[3]         = 7;
    expect_refused(&d, "y_train row 3 is 7, expected a class in [0, 2)");
    y[3]  = 1;
    d.row = 3;
    expect_refused(&d, "rows of 3 values, but the model reads 2");
    d.row    = 2;
    d.y_test = NULL;
    expect_refused(&d, "a classifier needs y_train and y_test");
    d.y_test = y + 48;
    d.n_test = 0;
    expect_refused(&d, "both need at least one");
    d.n_test  = 16;
    d.n_train = INT64_MAX / 4;
    expect_refused(&d, "more than memory holds");
    d.n_train = 48;
    /* a token model reads windows of a stream, not rows */
    ampx_model *m = load(AMPX_SOURCE_DIR "/models/gpt_tiny.json", NULL);
    cr_expect_eq(ampx_model_set_data(m, &d), AMPX_ERR_UNSUPPORTED);
    ampx_model_free(m);
}

// ---------------------------------------------------------------------------------------
// A batch source (ampx_trainer_set_batches): the caller makes each micro-batch; a bad row or
// a stop from the source ends the run with its message.

typedef struct xor_source {
    int64_t calls, last_micro;
    int bad; /* 1: a NaN in micro-batch 3; 2: class 9 in micro-batch 2; 3: stop at 4 */
} xor_source;

static int xor_batch(void *user, int64_t micro, int64_t rows, float *x, int32_t *y) {
    xor_source *s = user;
    s->calls++, s->last_micro = micro;
    xor_rows(x, y, rows, (uint32_t)(micro * 2654435761u + 17u), 0);
    if (s->bad == 1 && micro == 3) x[2 * 4 + 1] = NAN;
    if (s->bad == 2 && micro == 2) y[6] = 9;
    return s->bad == 3 && micro == 4;
}

/* A trainer of model json on held-out rows d, fed by a source of kind bad. */
static ampx_trainer *source_trainer(const char *json, ampx_memory_data *d, xor_source *s,
                                    ampx_model **m, ampx_backend **be, char **path) {
    *path = write_model(json);
    *m    = load(*path, NULL);
    *be   = open_cpu();
    cr_assert_eq(ampx_model_set_data(*m, d), AMPX_OK);
    ampx_trainer *t = trainer(*m, *be);
    cr_assert_eq(ampx_trainer_row_values(t), 2);
    cr_assert_eq(ampx_trainer_set_batches(t, xor_batch, s), AMPX_OK);
    return t;
}

Test(batch_source, trains_on_the_callers_batches) {
    enum { NTE = 500 };
    static float xte[2 * NTE], xtr[2 * 32];
    static int32_t yte[NTE], ytr[32];
    xor_rows(xte, yte, NTE, 99, 0);
    /* the data's own training rows all say class 0: only the source's batches teach xor */
    xor_rows(xtr, ytr, 32, 5, 0);
    memset(ytr, 0, sizeof ytr);
    ampx_memory_data d = {32, NTE, 2, xtr, xte, ytr, yte};
    xor_source s       = {0, -1, 0};
    ampx_model *m;
    ampx_backend *be;
    char *path;
    ampx_trainer *t = source_trainer(xor_json, &d, &s, &m, &be, &path);
    cr_assert_eq(ampx_trainer_run(t, 400, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    cr_expect_eq(s.calls, 400);
    cr_expect_eq(s.last_micro, 399);
    ampx_eval_result ev;
    cr_assert_eq(ampx_trainer_evaluate(t, &ev), AMPX_OK);
    cr_expect_gt(ev.accuracy, 0.9, "accuracy %.3f from the source's batches", ev.accuracy);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(path), free(path);
}

/* An mse model on the one-hot codes of the classes asks its source for the classes too. */
Test(batch_source, one_hot_targets_take_the_sources_classes) {
    static const char *xor_mse_json =
        "{\"name\":\"xor_mse\",\"inputs\":{\"x\":{\"dtype\":\"f32\",\"shape\":[2]},"
        "\"y\":{\"dtype\":\"f32\",\"shape\":[2]}},\"layers\":[{\"name\":\"h\",\"type\":"
        "\"dense\",\"units\":32,\"activation\":\"relu\"},{\"name\":\"out\",\"type\":\"dense\","
        "\"units\":2}],\"loss\":{\"type\":\"mse\",\"predictions\":\"out\",\"targets\":\"y\"},"
        "\"optimizer\":{\"type\":\"adamw\",\"lr\":0.01},\"train\":{\"steps\":400,\"batch\":32,"
        "\"seed\":1}}";
    enum { NTE = 500 };
    static float xte[2 * NTE], xtr[2 * 32];
    static int32_t yte[NTE], ytr[32];
    xor_rows(xte, yte, NTE, 99, 0);
    xor_rows(xtr, ytr, 32, 5, 0);
    memset(ytr, 0, sizeof ytr);
    ampx_memory_data d = {32, NTE, 2, xtr, xte, ytr, yte};
    xor_source s       = {0, -1, 0};
    ampx_model *m;
    ampx_backend *be;
    char *path;
    ampx_trainer *t = source_trainer(xor_mse_json, &d, &s, &m, &be, &path);
    cr_assert_eq(ampx_trainer_run(t, 400, NULL, NULL), AMPX_OK, "%s", ampx_trainer_error(t));
    ampx_eval_result ev;
    cr_assert_eq(ampx_trainer_evaluate(t, &ev), AMPX_OK);
    cr_expect_lt(ev.loss, 0.15, "held-out mse %.3f: the source's classes were not read", ev.loss);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    unlink(path), free(path);
}

Test(batch_source, bad_rows_and_stops_end_the_run) {
    static const char *const want[] = {
        "batch source, micro-batch 3: row 4 column 1 is not finite",
        "batch source, micro-batch 2: row 6 has class 9, not in [0, 2)",
        "the batch source stopped at micro-batch 4"};
    float x[2 * 64];
    int32_t y[64];
    xor_rows(x, y, 64, 3, 0);
    ampx_memory_data d = {48, 16, 2, x, x + 2 * 48, y, y + 48};
    for (int bad = 1; bad <= 3; bad++) {
        xor_source s = {0, -1, bad};
        ampx_model *m;
        ampx_backend *be;
        char *path;
        ampx_trainer *t = source_trainer(xor_json, &d, &s, &m, &be, &path);
        cr_expect_eq(ampx_trainer_run(t, 20, NULL, NULL), AMPX_ERR_INVALID, "%s", want[bad - 1]);
        cr_expect(strstr(ampx_trainer_error(t), want[bad - 1]) != NULL, "'%s' does not say '%s'",
                  ampx_trainer_error(t), want[bad - 1]);
        ampx_trainer_free(t);
        ampx_backend_close(be);
        ampx_model_free(m);
        unlink(path), free(path);
    }
    ampx_model *m    = load(AMPX_SOURCE_DIR "/models/gpt_tiny.json", NULL);
    ampx_backend *be = open_cpu();
    ampx_trainer *t  = trainer(m, be);
    cr_expect_eq(ampx_trainer_set_batches(t, xor_batch, NULL), AMPX_ERR_UNSUPPORTED);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
}
