/* test_hostile.c — the library against a misbehaving plugin: buffers allocated before a
 * failing start-up are all freed, whichever allocation fails; device strings without a
 * terminating NUL come back bounded. (The command-line cases are in hostile.sh.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ampx/ampx.h"
#include "ampx/train.h"

#define PLUGIN(name) AMPX_TEST_PLUGIN_DIR "/lib" name ".so"

__attribute__((constructor)) static void inner_plugin_default(void) {
    setenv("AMPX_TEST_INNER_PLUGIN", AMPX_TEST_CPU_PLUGIN, 0);
}

/* The wrapper reports "live_buffers=N ..." in its device description. */
static long live_buffers(ampx_backend *be) {
    ampx_device_info info = {.size = sizeof info};
    cr_assert_eq(ampx_backend_device_info(be, &info), AMPX_OK);
    const char *p = strstr(info.description, "live_buffers=");
    cr_assert_not_null(p, "no live_buffers in '%s'", info.description);
    return atol(p + strlen("live_buffers="));
}

Test(startup, every_failing_allocation_frees_what_came_before) {
    char err[1024];
    int failed = 0, created = 0;
    /* mlp.json with adamw: the self-check's buffer, 6 parameters with 4 buffers each (master,
     * moments, working copy), the gradient arena, then state, arena, ring, inputs: 30 */
    for (int limit = 0; limit <= 48; limit++) {
        char v[16];
        snprintf(v, sizeof v, "%d", limit);
        setenv("AMPX_TEST_ALLOC_LIMIT", v, 1);
        ampx_backend *be;
        cr_assert_eq(ampx_backend_open(PLUGIN("alloc_limit"), NULL, 0, &be, err, sizeof err),
                     AMPX_OK, "%s", err);
        ampx_model *m;
        cr_assert_eq(ampx_model_load(AMPX_SOURCE_DIR "/models/mlp.json", NULL, &m, err, sizeof err),
                     AMPX_OK, "%s", err);
        ampx_trainer *t = NULL;
        ampx_status st  = ampx_trainer_create(m, be, &t, err, sizeof err);
        if (st != AMPX_OK) {
            failed++;
            cr_assert_null(t);
            cr_assert(strstr(err, "injected failure") || strstr(err, "out of memory"),
                      "limit %d: %s", limit, err);
        } else {
            created++;
            ampx_trainer_free(t);
        }
        cr_assert_eq(live_buffers(be), 0, "limit %d: %ld buffers leaked after '%s'", limit,
                     live_buffers(be), st ? err : "success");
        ampx_model_free(m);
        ampx_backend_close(be);
    }
    unsetenv("AMPX_TEST_ALLOC_LIMIT");
    cr_assert_geq(failed, 30, "only %d start-ups failed", failed);
    cr_assert_gt(created, 0, "no start-up succeeded within 48 allocations");
}

Test(plugin, device_strings_without_nul_are_bounded) {
    char err[1024];
    ampx_backend *be;
    cr_assert_eq(ampx_backend_open(PLUGIN("crash"), NULL, 0, &be, err, sizeof err), AMPX_OK, "%s",
                 err);
    ampx_device_info info;
    memset(&info, 'Z', sizeof info);
    info.size = sizeof info;
    cr_assert_eq(ampx_backend_device_info(be, &info), AMPX_OK);
    cr_assert_eq(strlen(info.name), sizeof info.name - 1);
    cr_assert_eq(strlen(info.description), sizeof info.description - 1);
    cr_assert_eq(info.name[0], 'X');
    ampx_backend_close(be);
}
