/* model.c — loading a model file: the settings (config/), the graph (graph/builder.c), an
 * optional policy file, then the policy pass. */
#include "passes/model.h"
#include "passes/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "graph/builder.h"

/* Reads "policy" and "scaler" from obj (the model, or a --policy file). */
static int parse_policy_and_scaler(jctx *c, settings *m, const json_value *obj) {
    const json_value *p = json_get(obj, "policy"), *s = json_get(obj, "scaler");
    if (p && policy_parse(c, p, &m->pol)) return -1;
    if (s) {
        scaler_defaults(&m->scaler, m->pol.compute);
        if (scaler_parse(c, s, &m->scaler)) return -1;
    }
    return 0;
}

ampx_status ampx_model_load(const char *path, const char *policy_path, ampx_model **out, char *err,
                            size_t err_cap) {
    return ampx_model_load_with(path, policy_path, NULL, 0, out, err, err_cap);
}

ampx_status ampx_model_load_with(const char *path, const char *policy_path, const char *const *sets,
                                 int n_sets, ampx_model **out, char *err, size_t err_cap) {
    return ampx_model_load_for(path, policy_path, sets, n_sets, AMPX_ALL_OPS, out, err, err_cap);
}

ampx_status ampx_model_load_for(const char *path, const char *policy_path, const char *const *sets,
                                int n_sets, uint64_t backend_ops, ampx_model **out, char *err,
                                size_t err_cap) {
    *out          = NULL;
    ampx_model *m = calloc(1, sizeof *m);
    if (!m || !(m->cfg.file = strdup(path)) || g_init_graph(&m->graph) || g_init_graph(&m->raw)) {
        if (m) free(m->cfg.file), g_free_graph(&m->graph), g_free_graph(&m->raw);
        free(m);
        err_set(ERR(err, err_cap), "%s: out of memory", path);
        return AMPX_ERR_NO_MEMORY;
    }
    settings *s = &m->cfg;
    settings_defaults(s);
    json_value *root = json_parse_file(path, ERR(err, err_cap)), *pol = NULL;
    jctx c = {.file = path, .err = ERR(err, err_cap), .sets = sets, .n_sets = n_sets};
    if (!root) goto fail;
    for (int i = 0; i < n_sets; i++)
        if (json_apply_set(root, sets[i], i, ERR(err, err_cap))) goto fail;
    static const char *const keys[] = {"name", "inputs", "layers",    "nodes",
                                       "loss", "policy", "scaler",    "optimizer",
                                       "data", "train",  "placement", NULL};
    if (jkeys(&c, root, keys)) goto fail;
    const char *name = "model";
    if (jstr(&c, root, "name", 0, &name)) goto fail;
    if (strlen(name) >= sizeof s->name) { /* checkpoints match models by this name */
        jerr(&c, json_get(root, "name"), "a model name has at most %zu bytes (this one has %zu)",
             sizeof s->name - 1, strlen(name));
        goto fail;
    }
    snprintf(s->name, sizeof s->name, "%s", name);
    settings_shown(s->name, s->name_shown, sizeof s->name_shown);
    if (g_build(&c, root, backend_ops, &m->graph)) goto fail;
    if (parse_policy_and_scaler(&c, s, root)) goto fail;
    if (json_get(root, "optimizer") && optimizer_parse(&c, s, json_get(root, "optimizer")))
        goto fail;
    if (json_get(root, "data") && data_parse(&c, s, json_get(root, "data"))) goto fail;
    if (json_get(root, "train") && train_parse(&c, s, json_get(root, "train"))) goto fail;
    if (json_get(root, "placement") && placement_parse(&c, s, json_get(root, "placement")))
        goto fail;
    if (policy_path) {
        pol = json_parse_file(policy_path, ERR(err, err_cap));
        if (!pol) goto fail;
        jctx pc                          = {.file = policy_path, .err = ERR(err, err_cap)};
        static const char *const pkeys[] = {"policy", "scaler", "placement", NULL};
        if (jkeys(&pc, pol, pkeys) || parse_policy_and_scaler(&pc, s, pol)) goto fail;
        if (json_get(pol, "placement") && placement_parse(&pc, s, json_get(pol, "placement")))
            goto fail;
        if (!json_get(pol, "policy") && !json_get(pol, "scaler") && !json_get(pol, "placement")) {
            jerr(&pc, pol, "expected \"policy\", \"scaler\" and/or \"placement\"");
            goto fail;
        }
    }
    if (s->weight_copies == COPIES_CAST && s->opt.stochastic_rounding) {
        jerr(&c, json_get(json_get(root, "train"), "weight_copies"),
             "working copies cast on use round to nearest; optimizer.stochastic_rounding needs "
             "them kept (\"keep\" or \"auto\")");
        goto fail;
    }
    if (!s->scaler.given) scaler_defaults(&s->scaler, s->pol.compute);
    s->opt.file_steps = (int32_t)s->train.steps;
    pass_job job      = {.m = m, .err = ERR(err, err_cap)};
    if (pass_run(&job, PASS_POLICY, PASS_POLICY)) goto fail;
    json_free(root);
    json_free(pol);
    *out = m;
    return AMPX_OK;
fail:
    json_free(root);
    json_free(pol);
    ampx_model_free(m);
    return AMPX_ERR_INVALID;
}

void ampx_model_free(ampx_model *m) {
    if (!m) return;
    settings_free(&m->cfg);
    g_free_graph(&m->graph);
    g_free_graph(&m->raw);
    free(m);
}

ampx_status ampx_model_set_data(ampx_model *m, const ampx_memory_data *d) {
    data_source src = m->cfg.data.source;
    if (d && (src == DATA_TEXT || src == DATA_TOKENS || src == DATA_EMBEDDED_TEXT))
        return AMPX_ERR_UNSUPPORTED; /* token streams are read as windows, not rows */
    m->cfg.data.memory = d;
    return AMPX_OK;
}

ampx_status ampx_model_place(ampx_model *m, const char *rule, char *err, size_t err_cap) {
    return placement_add_rule(&m->cfg.place, rule, ERR(err, err_cap)) ? AMPX_ERR_INVALID : AMPX_OK;
}

ampx_train_config *ampx_model_train_config(ampx_model *m) {
    return &m->cfg.train;
}
const char *ampx_model_name(const ampx_model *m) {
    return m->cfg.name_shown;
}
