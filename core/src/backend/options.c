/* options.c — the options a backend's create() gets: AMPX_BACKEND_OPTS and the caller's,
 * scoped NAME.key=value to one backend, and the loader's own ops= option, which hides op
 * slots of a plugin so that a backend list places those ops on a later member. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/loaded.h"

/* The options create() gets: AMPX_BACKEND_OPTS (comma-separated) first, then the caller's.
 * An environment entry may be scoped to one backend as NAME.key=value; unscoped entries go
 * to every backend, and entries scoped to another backend are left out. A piece without '='
 * continues the value before it (opencl.gemm_params=64,64,16,8,8,4 is one entry): every
 * option is key=value, so such a piece cannot start one. */
char **loader_merge_options(const char *name, const char *const *options, uint32_t n,
                            uint32_t *n_out) {
    const char *env = getenv("AMPX_BACKEND_OPTS");
    char *envcp     = env && *env ? strdup(env) : NULL;
    uint32_t cap = n + 1, used = 0;
    if (envcp)
        for (const char *p = envcp; *p; p++)
            cap += *p == ',';
    char **list = calloc(cap + 1, sizeof *list);
    if (!list) goto out;
    if (envcp) {
        char *save = NULL;
        int prev   = 0; /* the entry before: 0 none, 1 kept (list[used - 1]), -1 left out */
        /* empty pieces (",,", a trailing comma) separate nothing and are skipped */
        for (char *t = strtok_r(envcp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            const char *dot = strchr(t, '.'), *eq = strchr(t, '=');
            if (!eq && prev) { /* the value before goes on */
                if (prev < 0) continue;
                size_t len   = strlen(list[used - 1]) + strlen(t) + 2;
                char *joined = malloc(len);
                if (joined) snprintf(joined, len, "%s,%s", list[used - 1], t);
                free(list[used - 1]);
                list[used - 1] = joined; /* NULL: the whole entry is dropped */
                if (!joined) used--, prev = -1;
                continue;
            }
            prev = -1;
            if (dot && (!eq || dot < eq)) {
                size_t len = (size_t)(dot - t);
                if (strlen(name) != len || strncmp(t, name, len) != 0) continue;
                t = (char *)dot + 1;
            }
            if ((list[used] = strdup(t))) used++, prev = 1;
        }
    }
    for (uint32_t i = 0; i < n; i++) { /* NAME.key=value: for the backend named NAME alone */
        const char *t = options[i], *dot = strchr(t, '.'), *eq = strchr(t, '=');
        if (dot && eq && dot < eq) {
            size_t len = (size_t)(dot - t);
            if (strlen(name) != len || strncmp(t, name, len) != 0) continue;
            t = dot + 1;
        }
        if ((list[used] = strdup(t))) used++;
    }
    *n_out = used;
out:
    free(envcp);
    return list;
}

void loader_free_options(char **list, uint32_t n) {
    if (!list) return;
    for (uint32_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* The ops= option (the loader's, never the plugin's): the op names, separated by ',' or
 * ':', that this backend is to show; every other op slot reads as absent, so an ordered list
 * places those ops elsewhere (a device brought up one op at a time, tested on a full
 * plugin). Takes the entries out of opts; 0, or -1 with e set. */
int loader_hide_ops(ampx_backend *be, char **opts, uint32_t *n, ampx_err e) {
    uint32_t kept = 0;
    int hid       = 0;
    uint8_t show[AMPX_OP_COUNT];
    memset(show, 0, sizeof show);
    for (uint32_t i = 0; i < *n; i++) {
        if (strncmp(opts[i], "ops=", 4) != 0) {
            opts[kept++] = opts[i];
            continue;
        }
        hid        = 1;
        char *save = NULL, *v = opts[i] + 4;
        for (char *t = strtok_r(v, ",:", &save); t; t = strtok_r(NULL, ",:", &save)) {
            uint32_t op = 0;
            while (op < AMPX_OP_COUNT && strcmp(ampx_op_name(op), t) != 0)
                op++;
            if (op == AMPX_OP_COUNT) {
                err_set(e,
                        "%s: option ops=: '%s' is not an op name (ampx backends --ops lists them)",
                        be->path, t);
                for (uint32_t k = i; k < *n; k++)
                    free(opts[k]);
                *n = kept;
                return -1;
            }
            show[op] = 1;
        }
        free(opts[i]);
    }
    *n = kept;
    if (!hid) return 0;
    void (**slots)(void) = (void (**)(void))((char *)&be->ops + 8);
    for (uint32_t op = 0; op < AMPX_OP_COUNT; op++)
        if (!show[op]) slots[op] = NULL;
    return 0;
}
