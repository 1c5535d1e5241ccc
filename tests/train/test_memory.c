/* test_memory.c — memory that shrinks with precision: the memory report by dtype against a
 * small model counted by hand, norms and softmax writing the dtype of the product that reads
 * them (no cast node, no f32 copy), train.recompute giving the same losses and weights bit
 * for bit with a lower planned peak, and its malformed values. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ampx/ampx.h"
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
    char *path = strdup("/tmp/ampx_memory_XXXXXX");
    int fd     = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(json, f);
    fclose(f);
    return path;
}

/* Loads json with --set flags; NULL with the message in err when it fails. */
static ampx_model *load_json(const char *json, const char *const *sets, int n_sets, char *err,
                             size_t cap) {
    char *path     = write_model(json);
    ampx_model *m  = NULL;
    ampx_status st = ampx_model_load_with(path, NULL, sets, n_sets, &m, err, cap);
    unlink(path);
    free(path);
    return st == AMPX_OK ? m : NULL;
}

// ---------------------------------------------------------------------------------------
// The report against a model counted by hand: x [4] -> dense 8 relu -> dense 3 (the output
// layer), AdamW, batch 16.

static const char *mlp_fmt =
    "{\"name\":\"hand\",\"inputs\":{\"x\":{\"dtype\":\"f32\",\"shape\":[4]},"
    "\"y\":{\"dtype\":\"i32\",\"classes\":3}},\"layers\":[{\"type\":\"dense\",\"units\":8,"
    "\"activation\":\"relu\"},{\"type\":\"dense\",\"units\":3}],\"policy\":\"%s\","
    "\"optimizer\":{\"type\":\"adamw\"},\"data\":{\"samples\":200},\"train\":{\"batch\":16}}";

static ampx_memory memory_of(const char *policy, int as_f32, uint64_t *trainer_arena) {
    char json[1024], err[1024];
    snprintf(json, sizeof json, mlp_fmt, policy);
    ampx_model *m = load_json(json, NULL, 0, err, sizeof err);
    cr_assert(m, "%s", err);
    ampx_memory mem;
    cr_assert_eq(ampx_model_memory(m, as_f32, &mem, err, sizeof err), AMPX_OK, "%s", err);
    if (trainer_arena) {
        ampx_backend *be = open_cpu();
        ampx_trainer *t  = NULL;
        cr_assert_eq(ampx_trainer_create(m, be, &t, err, sizeof err), AMPX_OK, "%s", err);
        uint64_t flat;
        ampx_trainer_memory(t, trainer_arena, &flat);
        ampx_trainer_free(t);
        ampx_backend_close(be);
    }
    ampx_model_free(m);
    return mem;
}

/* Parameters: fc1 4x8 + 8, fc2 8x3 + 3 = 67 values. Each has an f32 master (4 bytes), Adam's
 * m and v (8) and an f32 gradient padded to 64 bytes in the gradient arena: 32 floats = 128,
 * 8 = 64, 24 = 128 (96 padded), 3 = 64 (12 padded), 384 in all. 67 * 12 + 384 = 1188 f32
 * bytes. Under mixed_bf16 the bf16 fc1 also reads a bf16 working copy of its weight (32 * 2);
 * the output layer fc2 stays f32 and reads its master. */
Test(report, parameters_and_state_by_dtype_as_counted_by_hand) {
    ampx_memory b = memory_of("mixed_bf16", 0, NULL), f = memory_of("mixed_bf16", 1, NULL);
    cr_expect_eq(b.params[AMPX_F32], 1188, "f32 %llu", (unsigned long long)b.params[AMPX_F32]);
    cr_expect_eq(b.params[AMPX_BF16], 64, "bf16 %llu", (unsigned long long)b.params[AMPX_BF16]);
    cr_expect_eq(b.params[AMPX_F16] + b.params[AMPX_I32], 0);
    cr_expect_eq(b.params_total, 1252);
    cr_expect_eq(f.params[AMPX_F32], 1188);
    cr_expect_eq(f.params_total, 1188);
}

/* Activations, batch 16 (each value padded to 64 bytes; x f32 [16, 4] = 256 bytes and y i32
 * [16] = 64 are the inputs, live throughout).
 * f32: m1 = x W1 [16, 8] (512), b1 = m1 + bias (512, read again by relu's backward), r1 =
 * relu (512, read by fc2's weight gradient), m2 = r1 W2 [16, 3] (192), logits (192), dlogits
 * (192, written by the loss), then dr1 = dlogits W2^T (512) and db1 = relu'(b1) dr1 (512).
 * The most live at once is at relu's backward: b1, dr1, db1 = 1536.
 * mixed_bf16: x->bf16 (128, read by fc1's weight gradient at the very end), m1, b1, r1 in
 * bf16 (256 each), r1->f32 for the f32 output layer (512), m2, logits, dlogits (192 each),
 * dr1 f32 (512), its cast back dr1->bf16 (256), db1 bf16 (256). The most live at once is at
 * the output layer's bias: x->bf16, b1 (bf16 384) and r1->f32, m2, logits (f32 896). */
Test(report, activations_by_dtype_as_counted_by_hand) {
    uint64_t arena_b, arena_f;
    ampx_memory b = memory_of("mixed_bf16", 0, &arena_b), f = memory_of("f32", 0, &arena_f);
    cr_expect_eq(f.activations[AMPX_F32], 1536 + 256, "f32 %llu",
                 (unsigned long long)f.activations[AMPX_F32]);
    cr_expect_eq(f.activations[AMPX_I32], 64);
    cr_expect_eq(f.activations[AMPX_BF16], 0);
    cr_expect_eq(f.inputs, 320);
    cr_expect_eq(b.activations[AMPX_BF16], 384, "bf16 %llu",
                 (unsigned long long)b.activations[AMPX_BF16]);
    cr_expect_eq(b.activations[AMPX_F32], 896 + 256, "f32 %llu",
                 (unsigned long long)b.activations[AMPX_F32]);
    cr_expect_eq(b.activations[AMPX_I32], 64);
    cr_expect_eq(b.activations_total, 384 + 896 + 320);
    /* the arena the trainer allocates is the one reported, and holds the live peak */
    cr_expect_eq(b.arena, arena_b);
    cr_expect_eq(f.arena, arena_f);
    cr_expect_geq(b.arena, b.activations_total - b.inputs);
    cr_expect_eq(b.total, b.arena + b.inputs + b.params_total);
    /* the f32 comparison of a mixed model is the f32 model's figures */
    ampx_memory as_f32 = memory_of("mixed_bf16", 1, NULL);
    cr_expect_eq(as_f32.arena, f.arena);
    cr_expect_eq(as_f32.activations_total, f.activations_total);
}

static void collect(void *user, const char *line) {
    char *all = user;
    size_t n  = strlen(all);
    snprintf(all + n, 65536 - n, "%s\n", line);
}

// ---------------------------------------------------------------------------------------
// A GPT block: norms write bf16 for the GEMMs after them, softmax for the product P V.

static const char *gpt_fmt =
    "{\"name\":\"blk\",\"inputs\":{\"ids\":{\"dtype\":\"i32\",\"shape\":[16]},"
    "\"next\":{\"dtype\":\"i32\",\"shape\":[16],\"classes\":256}},\"nodes\":["
    "{\"name\":\"wte\",\"op\":\"embedding\",\"inputs\":[\"ids\"],\"vocab\":256,\"dim\":32},"
    "{\"name\":\"pos\",\"op\":\"position_embedding\",\"inputs\":[\"wte\"]},"
    "{\"name\":\"ln1\",\"op\":\"layernorm\",\"inputs\":[\"pos\"]},"
    "{\"name\":\"attn\",\"op\":\"attention\",\"inputs\":[\"ln1\"],\"heads\":2,\"fused\":false},"
    "{\"name\":\"res1\",\"op\":\"add\",\"inputs\":[\"pos\",\"attn\"]},"
    "{\"name\":\"ln2\",\"op\":\"layernorm\",\"inputs\":[\"res1\"]},"
    "{\"name\":\"fc\",\"op\":\"dense\",\"inputs\":[\"ln2\"],\"units\":128,\"activation\":\"gelu\"},"
    "{\"name\":\"proj\",\"op\":\"dense\",\"inputs\":[\"fc.gelu\"],\"units\":32},"
    "{\"name\":\"res2\",\"op\":\"add\",\"inputs\":[\"res1\",\"proj\"]},"
    "{\"name\":\"ln_f\",\"op\":\"layernorm\",\"inputs\":[\"res2\"]},"
    "{\"name\":\"out\",\"op\":\"dense\",\"inputs\":[\"ln_f\"],\"share\":\"wte\"}],"
    "\"loss\":{\"logits\":\"out\",\"labels\":\"next\"},\"policy\":\"%s\",\"scaler\":\"dynamic\","
    "\"data\":{\"source\":\"embedded_text\",\"bytes\":20000},"
    "\"train\":{\"batch\":4,\"seed\":5,\"log_every\":1%s}}";

/* (attention as its composite: the softmax whose output the P V product reads is what the
 * fold of norms and softmax into their reader's dtype is checked on) */
static ampx_model *gpt(const char *policy, const char *train_extra) {
    char json[4096], err[1024];
    snprintf(json, sizeof json, gpt_fmt, policy, train_extra);
    ampx_model *m = load_json(json, NULL, 0, err, sizeof err);
    cr_assert(m, "%s", err);
    return m;
}

/* The dtype column of the description's line for tensor `name` ("" when no such line), and
 * the rest of that line in why. */
static const char *dtype_of(const char *all, const char *name, char *why, size_t cap) {
    static char dt[16];
    size_t n = strlen(name);
    dt[0] = why[0] = 0;
    for (const char *p = all; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, name, n) && p[n] == ' ') {
            char shape[64];
            const char *end = strchr(p, '\n');
            snprintf(why, cap, "%.*s", (int)(end ? end - p : (long)strlen(p)), p);
            if (sscanf(p + n, " %15s %63s", dt, shape) != 2) dt[0] = 0;
            break;
        }
    return dt;
}

Test(policy, norms_and_softmax_write_the_dtype_of_the_product_that_reads_them) {
    ampx_model *m = gpt("mixed_bf16", "");
    char *all     = calloc(65536, 1);
    ampx_model_describe(m, collect, all);
    ampx_model_describe_memory(m, collect, all);
    char why[256];
    /* the dtype column is the one the node runs in (the trace's), then what it writes */
    const char *reason =
        "runs in f32, writes the dtype of the product that reads it, no cast (bf16)";
    cr_expect_str_eq(dtype_of(all, "ln1", why, sizeof why), "f32", "%s", all);
    cr_expect(strstr(why, reason), "%s", why);
    cr_expect_str_eq(dtype_of(all, "ln2", why, sizeof why), "f32", "%s", why);
    cr_expect(strstr(why, reason), "%s", why);
    cr_expect_str_eq(dtype_of(all, "attn.probs", why, sizeof why), "f32", "%s", why);
    cr_expect(strstr(why, reason), "%s", why);
    /* the final norm feeds the f32 output layer: it stays f32 */
    cr_expect_str_eq(dtype_of(all, "ln_f", why, sizeof why), "f32", "%s", why);
    cr_expect(strstr(why, "norms, softmax, reductions and losses run in f32"), "%s", why);
    cr_expect(strstr(all, "\ncasts inserted: 0\n"), "%s", all);
    cr_expect(!strstr(all, "->bf16"), "%s", all);
    cr_expect(strstr(all, "\nmemory at batch 4: activations "), "%s", all);
    free(all);
    ampx_model_free(m);
}

// ---------------------------------------------------------------------------------------
// Recompute: the same losses and weights bit for bit, a lower planned peak.

typedef struct run_out {
    double loss[8];
    int n;
    float *weights;
    uint64_t n_weights, peak;
    ampx_memory mem;
} run_out;

static int on_record(void *user, const ampx_step_record *r) {
    run_out *o = user;
    if (o->n < 8) o->loss[o->n++] = r->loss;
    return 0;
}

static run_out train(const char *policy, const char *train_extra, int steps) {
    ampx_model *m    = gpt(policy, train_extra);
    ampx_backend *be = open_cpu();
    ampx_trainer *t  = NULL;
    char err[1024];
    cr_assert_eq(ampx_trainer_create(m, be, &t, err, sizeof err), AMPX_OK, "%s", err);
    run_out o = {0};
    cr_assert_eq(ampx_trainer_run(t, steps, on_record, &o), AMPX_OK, "%s", ampx_trainer_error(t));
    for (int p = 0; p < ampx_trainer_n_params(t); p++)
        o.n_weights += ampx_trainer_param_size(t, p);
    o.weights = malloc(o.n_weights * 4);
    float *at = o.weights;
    for (int p = 0; p < ampx_trainer_n_params(t); p++) {
        cr_assert_eq(ampx_trainer_get(t, p, 0, at), AMPX_OK);
        at += ampx_trainer_param_size(t, p);
    }
    uint64_t flat;
    ampx_trainer_memory(t, &o.peak, &flat);
    cr_assert_eq(ampx_model_memory(m, 0, &o.mem, err, sizeof err), AMPX_OK, "%s", err);
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    return o;
}

static void same_run(const char *policy) {
    run_out a = train(policy, "", 6);
    run_out b = train(policy, ",\"recompute\":[\"gelu\",\"layernorm\"]", 6);
    cr_assert_eq(a.n, 6);
    cr_assert_eq(b.n, 6);
    for (int i = 0; i < 6; i++)
        cr_expect(!memcmp(&a.loss[i], &b.loss[i], sizeof(double)),
                  "%s step %d: loss %.17g vs %.17g", policy, i + 1, a.loss[i], b.loss[i]);
    cr_expect(a.loss[5] != a.loss[0], "%s: the loss did not move", policy);
    cr_assert_eq(a.n_weights, b.n_weights);
    cr_expect(!memcmp(a.weights, b.weights, a.n_weights * 4),
              "%s: weights differ after recomputing", policy);
    cr_expect_lt(b.peak, a.peak, "%s: planned peak %llu with recompute, %llu without", policy,
                 (unsigned long long)b.peak, (unsigned long long)a.peak);
    cr_expect_lt(b.mem.activations_total, a.mem.activations_total);
    cr_expect_eq(b.mem.arena, b.peak);
    free(a.weights), free(b.weights);
}

Test(recompute, gelu_and_layernorm_bit_identical_and_lower_peak_f32) {
    same_run("f32");
}

Test(recompute, gelu_and_layernorm_bit_identical_and_lower_peak_mixed_bf16) {
    same_run("mixed_bf16");
}

/* The hand-counted f32 MLP with relu recomputed: r1 now dies at the output layer's product
 * and a copy is made again before that layer's weight gradient; the peak, at relu's
 * backward (b1, dr1, db1), is the same 1536 bytes, and "tanh" (no such node) adds nothing. */
Test(recompute, relu_in_the_hand_counted_mlp_keeps_its_peak) {
    char json[1024], err[1024];
    snprintf(json, sizeof json, mlp_fmt, "f32");
    const char *sets[] = {"train.recompute=[\"relu\", \"tanh\"]"};
    ampx_model *m      = load_json(json, sets, 1, err, sizeof err);
    cr_assert(m, "%s", err);
    ampx_memory with;
    cr_assert_eq(ampx_model_memory(m, 0, &with, err, sizeof err), AMPX_OK, "%s", err);
    ampx_model_free(m);
    cr_expect_eq(with.activations[AMPX_F32], 1536 + 256, "f32 %llu",
                 (unsigned long long)with.activations[AMPX_F32]);
}

// ---------------------------------------------------------------------------------------
// Malformed train.recompute

static void expect_error(const char *set, const char *want) {
    char json[1024], err[1024];
    snprintf(json, sizeof json, mlp_fmt, "f32");
    const char *sets[] = {set};
    ampx_model *m      = load_json(json, sets, 1, err, sizeof err);
    cr_expect_null(m, "%s was accepted", set);
    cr_expect(strstr(err, want), "%s: '%s' does not say '%s'", set, err, want);
    ampx_model_free(m);
}

Test(recompute, malformed_values_get_one_clear_message) {
    expect_error("train.recompute=[\"gelus\"]",
                 "$.train.recompute[0]: cannot recompute \"gelus\" (did you mean \"gelu\"?)");
    expect_error("train.recompute=[\"gelu\", \"layernrom\"]",
                 "$.train.recompute[1]: cannot recompute \"layernrom\" (did you mean "
                 "\"layernorm\"?)");
    expect_error("train.recompute=[\"attention\"]",
                 "expected what to recompute: layernorm, relu, gelu, tanh, sigmoid or silu");
    expect_error("train.recompute=[3]", "expected what to recompute");
    expect_error("train.recompute=\"gelu\"", "$.train.recompute: expected an array");
    expect_error("train.recompute=[\"gelu\", \"gelu\"]", "\"gelu\" is listed twice");
}

// ---------------------------------------------------------------------------------------
// train.weight_copies: working copies cast from their masters on use instead of kept. The
// casts round to nearest as the optimizer's copy writes do, so the losses and the weights are
// the same bits; the copies leave the parameters and take a layer's worth of the arena.

Test(copies, cast_on_use_bit_identical_and_smaller) {
    run_out k = train("mixed_bf16", ",\"weight_copies\":\"keep\"", 6);
    run_out c = train("mixed_bf16", ",\"weight_copies\":\"cast\"", 6);
    cr_assert_eq(k.n, 6);
    cr_assert_eq(c.n, 6);
    for (int i = 0; i < 6; i++)
        cr_expect(!memcmp(&k.loss[i], &c.loss[i], sizeof(double)), "step %d: loss %.17g vs %.17g",
                  i + 1, k.loss[i], c.loss[i]);
    cr_expect(k.loss[5] != k.loss[0], "the loss did not move");
    cr_assert_eq(k.n_weights, c.n_weights);
    cr_expect(!memcmp(k.weights, c.weights, k.n_weights * 4), "weights differ with cast copies");
    /* fc (32x128), proj (128x32) and the attention's qkv (32x96) and projection (32x32) */
    uint64_t copies = (32 * 128 + 128 * 32 + 32 * 96 + 32 * 32) * 2;
    cr_expect_eq(k.mem.params[AMPX_BF16], copies, "kept copies %llu",
                 (unsigned long long)k.mem.params[AMPX_BF16]);
    cr_expect_eq(c.mem.params[AMPX_BF16], 0);
    cr_expect_eq(c.mem.params[AMPX_F32], k.mem.params[AMPX_F32]);
    cr_expect_lt(c.mem.total, k.mem.total);
    cr_expect_eq(c.mem.arena, c.peak, "the trainer's arena is the one reported");
    free(k.weights), free(c.weights);
}

/* The GPT-2 124M shape at T=64, B=4 with a byte vocabulary: the activations are small, so
 * the bf16 copies of the weights (162 MiB) cost more than bf16 activations save, and "auto"
 * casts them; gpt.json at its own T=128, B=16, saves more in activations, and keeps them. */
static ampx_model *shipped(const char *file, const char *copies, int small) {
    char path[1024], err[1024], set[64];
    snprintf(path, sizeof path, "%s/models/%s", AMPX_SOURCE_DIR, file);
    snprintf(set, sizeof set, "train.weight_copies=\"%s\"", copies);
    const char *sets[] = {set,
                          "inputs.tokens.shape=[64]",
                          "inputs.next.shape=[64]",
                          "train.batch=4",
                          "nodes[0].vocab=256",
                          "inputs.next.classes=256"};
    ampx_model *m      = NULL;
    cr_assert_eq(ampx_model_load_with(path, NULL, sets, small ? 6 : 1, &m, err, sizeof err),
                 AMPX_OK, "%s", err);
    return m;
}

static ampx_memory planned(ampx_model *m, int as_f32) {
    ampx_memory mem;
    char err[1024];
    cr_assert_eq(ampx_model_memory(m, as_f32, &mem, err, sizeof err), AMPX_OK, "%s", err);
    return mem;
}

Test(copies, auto_casts_where_kept_copies_cost_more_than_f32) {
    ampx_model *keep = shipped("gpt2_124m.json", "keep", 1),
               *cast = shipped("gpt2_124m.json", "cast", 1),
               *au   = shipped("gpt2_124m.json", "auto", 1);
    ampx_memory k = planned(keep, 0), c = planned(cast, 0), a = planned(au, 0),
                f = planned(keep, 1);
    cr_expect_gt(k.params[AMPX_BF16], 150u << 20, "kept copies %llu",
                 (unsigned long long)k.params[AMPX_BF16]);
    cr_expect_gt(k.total, f.total, "keeping the copies should cost more than f32 here");
    cr_expect_eq(c.params[AMPX_BF16], 0);
    cr_expect_lt(c.total, f.total, "cast copies: %llu against f32's %llu",
                 (unsigned long long)c.total, (unsigned long long)f.total);
    cr_expect_eq(a.total, c.total, "auto should cast");
    char *all = calloc(65536, 1);
    ampx_model_describe_memory(au, collect, all);
    cr_expect(strstr(all, "weight copies: cast from the f32 masters where read"), "%s", all);
    all[0] = 0;
    ampx_model_describe(au, collect, all);
    cr_expect(strstr(all, "bf16 working copy cast from it where read"), "%s", all);
    cr_expect(!strstr(all, "written by the optimizer"), "%s", all);
    all[0] = 0;
    ampx_model_describe(keep, collect, all);
    cr_expect(strstr(all, "bf16 working copy written by the optimizer"), "%s", all);
    all[0] = 0;
    ampx_model_describe_memory(keep, collect, all);
    cr_expect(!strstr(all, "weight copies"), "%s", all);
    free(all);
    ampx_model_free(keep), ampx_model_free(cast), ampx_model_free(au);

    ampx_model *gk = shipped("gpt.json", "keep", 0), *ga = shipped("gpt.json", "auto", 0);
    ampx_memory gkm = planned(gk, 0), gam = planned(ga, 0), gf = planned(gk, 1);
    cr_expect_lt(gkm.total, gf.total, "gpt.json keeps its copies and stays below f32");
    cr_expect_gt(gam.params[AMPX_BF16], 0, "auto should keep gpt.json's copies");
    cr_expect_eq(gam.total, gkm.total);
    ampx_model_free(gk), ampx_model_free(ga);
}

Test(copies, malformed_values_get_one_clear_message) {
    expect_error(
        "train.weight_copies=\"kept\"",
        "$.train.weight_copies: unknown value \"kept\" (expected one of: auto, keep, cast)");
    expect_error("train.weight_copies=1", "$.train.weight_copies");
    char json[1024], err[1024];
    snprintf(json, sizeof json, mlp_fmt, "mixed_bf16");
    const char *sets[] = {"train.weight_copies=\"cast\"", "optimizer.stochastic_rounding=true"};
    ampx_model *m      = load_json(json, sets, 2, err, sizeof err);
    cr_expect_null(m, "cast copies with stochastic rounding were accepted");
    cr_expect(strstr(err, "$.train.weight_copies: working copies cast on use round to nearest"),
              "%s", err);
    ampx_model_free(m);
}
