/* loaded.h — an opened backend as the loader keeps it (loader.c, list.c). */
#ifndef AMPX_BACKEND_LOADED_H
#define AMPX_BACKEND_LOADED_H

#include <limits.h>

#include "ampx/ampx.h"
#include "base/error.h"

struct ampx_backend {
    void *dl;
    ampx_backend_iface iface; /* host-sized copy of the plugin's table; once created, its
                                 context and buffer slots are the guarded ones below */
    ampx_backend_iface real;  /* the plugin's own slots */
    ampx_backend_ops ops;     /* host-sized copy of the op table */
    ampx_context *ctx;
    char path[PATH_MAX];
    char last_error[1024];
    /* an ordered list (--backend a,b): its members, each opened on its own; the list's own
     * table and context are its first member's */
    ampx_backend **members;
    int n_members;
};

/* The options create() gets (options.c): AMPX_BACKEND_OPTS, then the caller's; entries scoped
 * NAME.key=value go to the backend named NAME alone, unscoped ones to every backend. */
char **loader_merge_options(const char *name, const char *const *options, uint32_t n,
                            uint32_t *n_out);
void loader_free_options(char **list, uint32_t n);
/* Opens one plugin (loader.c). */
ampx_status loader_open_one(const char *spec, const char *const *options, uint32_t n_options,
                            ampx_backend **out, ampx_err e);
/* Opens an ordered list "a,b" (list.c). */
ampx_status loader_open_list(const char *spec, const char *const *options, uint32_t n_options,
                             ampx_backend **out, ampx_err e);
/* Takes the ops= entries out of opts and hides every op slot they do not name (options.c). */
int loader_hide_ops(ampx_backend *be, char **opts, uint32_t *n, ampx_err e);

#endif
