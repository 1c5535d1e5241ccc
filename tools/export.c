/* export.c — `ampx export`: the weights of a checkpoint as a plain safetensors file.
 *
 *   ampx export --checkpoint F -o W.safetensors [--dtype f32|bf16|f16]
 *
 * Parameters and running statistics under their names (a dense weight [in, out]), no
 * optimizer state, no loss-scaler state: what the safetensors reference reader and PyTorch's
 * safetensors.torch.load_file read, and what `ampx train --init-from` starts from. */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ampx/dtype.h"
#include "ampx/train.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ampx export --checkpoint FILE -o W.safetensors [--dtype f32|bf16|f16]\n"
               "The weights of a checkpoint (no optimizer state) as a plain safetensors file.\n");
}

typedef struct export_opts {
    const char *checkpoint, *output;
    ampx_dtype dt;
} export_opts;

static int opt_dtype(void *opts, int argc, char **argv, const char *v) {
    export_opts *o = opts;
    if (!strcmp(v, "f32"))
        o->dt = AMPX_F32;
    else if (!strcmp(v, "bf16"))
        o->dt = AMPX_BF16;
    else if (!strcmp(v, "f16"))
        o->dt = AMPX_F16;
    else {
        fprintf(stderr, "%s: --dtype '%s': expected f32, bf16 or f16\n", argv[0], v);
        return -1;
    }
    return 0;
}

static const cli_opt export_table[] = {
    CLI_OPT_STRING("checkpoint", 'c', offsetof(export_opts, checkpoint), 0),
    CLI_OPT_STRING("output", 'o', offsetof(export_opts, output), 0),
    CLI_OPT_CALL("dtype", 'd', opt_dtype, 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

int cli_export(int argc, char **argv) {
    export_opts o = {.dt = AMPX_F32};
    cli_parser p  = {"o:h", export_table, 0, NULL};
    int rc        = cli_parse_or_usage(&p, argc, argv, &o, usage);
    if (rc >= 0) return rc;
    if (optind != argc || !o.checkpoint || !o.output) {
        fprintf(stderr, "%s: expected --checkpoint FILE and -o W.safetensors\n", argv[0]);
        return EXIT_USAGE;
    }
    char err[1024];
    if (ampx_checkpoint_export(o.checkpoint, o.output, o.dt, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        return EXIT_FAILED;
    }
    return 0;
}
