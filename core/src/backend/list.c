/* list.c — opening a backend: one plugin (loader.c) or an ordered list ("./libvendor.so,cpu"),
 * each member opened on its own, and the check that every option scoped NAME.key=value names
 * a backend in use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/loaded.h"

enum { MAX_MEMBERS = 8 };

/* An ordered list "a,b": each member opened alone (options scoped NAME.key=value go to
 * their member, unscoped ones to every member); the list's table, op slots and context are
 * its first member's, so a caller that knows nothing of lists sees that backend. */
ampx_status loader_open_list(const char *spec, const char *const *options, uint32_t n_options,
                             ampx_backend **out, ampx_err e) {
    ampx_backend *list = calloc(1, sizeof *list);
    char *copy         = strdup(spec);
    ampx_status st     = AMPX_ERR_NO_MEMORY;
    if (!list || !copy || !(list->members = calloc(MAX_MEMBERS, sizeof *list->members))) {
        err_set(e, "out of host memory");
        goto fail;
    }
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (list->n_members == MAX_MEMBERS) {
            err_set(e, "backend list '%s': more than %d backends", spec, MAX_MEMBERS);
            st = AMPX_ERR_INVALID;
            goto fail;
        }
        if ((st = loader_open_one(t, options, n_options, &list->members[list->n_members], e)))
            goto fail;
        ampx_backend *m = list->members[list->n_members++];
        for (int k = 0; k < list->n_members - 1; k++)
            if (strcmp(list->members[k]->iface.name, m->iface.name) == 0) {
                err_set(e,
                        "backend list '%s': backend '%s' is named twice (its options and its "
                        "placements could not tell them apart)",
                        spec, m->iface.name);
                st = AMPX_ERR_INVALID;
                goto fail;
            }
    }
    if (list->n_members < 1) {
        err_set(e, "backend list '%s': no backend named", spec);
        st = AMPX_ERR_INVALID;
        goto fail;
    }
    const ampx_backend *first = list->members[0];
    list->iface               = first->iface;
    list->ops                 = first->ops;
    list->ctx                 = first->ctx;
    snprintf(list->path, sizeof list->path, "%s", spec);
    free(copy);
    *out = list;
    return AMPX_OK;
fail:
    free(copy);
    ampx_backend_close(list);
    return st;
}

int ampx_backend_count(const ampx_backend *be) {
    return be->members ? be->n_members : 1;
}

ampx_backend *ampx_backend_member(ampx_backend *be, int i) {
    if (!be->members) return i == 0 ? be : NULL;
    return i >= 0 && i < be->n_members ? be->members[i] : NULL;
}

ampx_status ampx_backend_open(const char *spec, const char *const *options, uint32_t n_options,
                              ampx_backend **out, char *err, size_t err_cap) {
    ampx_err e     = ERR(err, err_cap);
    *out           = NULL;
    ampx_status st = spec && strchr(spec, ',') ? loader_open_list(spec, options, n_options, out, e)
                                               : loader_open_one(spec, options, n_options, out, e);
    if (st) return st;
    /* an option scoped to a backend that is not open would be lost without a word */
    for (uint32_t i = 0; i < n_options; i++) {
        const char *t = options[i], *dot = strchr(t, '.'), *eq = strchr(t, '=');
        if (!dot || !eq || dot > eq) continue;
        int found = 0;
        for (int m = 0; m < ampx_backend_count(*out) && !found; m++) {
            const char *name = ampx_backend_member(*out, m)->iface.name;
            found = strlen(name) == (size_t)(dot - t) && strncmp(t, name, (size_t)(dot - t)) == 0;
        }
        if (!found) {
            err_set(e, "option '%s' is scoped to backend '%.*s', which is not in use (%s)", t,
                    (int)(dot - t), t, spec);
            ampx_backend_close(*out);
            *out = NULL;
            return AMPX_ERR_INVALID;
        }
    }
    return AMPX_OK;
}
