/* export.c — `ampx export`: the weights of a checkpoint as a plain safetensors file, or as
 * an llm.c GPT-2 checkpoint.
 *
 *   ampx export --checkpoint F -o W.safetensors [--dtype f32|bf16|f16]
 *   ampx export MODEL.json --checkpoint F --format llmc --out W.bin [--dtype f32|bf16]
 *
 * Parameters and running statistics under their names (a dense weight [in, out]), no
 * optimizer state, no loss-scaler state: what the safetensors reference reader and PyTorch's
 * safetensors.torch.load_file read, and what `ampx train --init-from` starts from. The llm.c
 * form needs the model (its heads, its structure) and writes what train_gpt2.c reads. */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ampx/dtype.h"
#include "ampx/train.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ampx export --checkpoint FILE -o W.safetensors [--dtype f32|bf16|f16]\n"
               "       ampx export MODEL.json --checkpoint FILE --format llmc --out W.bin\n"
               "                   [--dtype f32|bf16] [--backend B] [--backend-opt k=v]...\n"
               "The weights of a checkpoint (no optimizer state) as a plain safetensors file,\n"
               "or as an llm.c GPT-2 checkpoint (version 3 f32, version 5 bf16).\n");
}

typedef struct export_opts {
    const char *checkpoint, *output, *format, *backend;
    cli_backend_opts bopts;
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
    CLI_OPT_STRING("out", 'O', offsetof(export_opts, output), 0),
    CLI_OPT_STRING("format", 'f', offsetof(export_opts, format), 0),
    CLI_OPT_STRING("backend", 'b', offsetof(export_opts, backend), 0),
    CLI_OPT_BACKEND("backend-opt", 'B', offsetof(export_opts, bopts)),
    CLI_OPT_CALL("dtype", 'd', opt_dtype, 0),
    CLI_OPT_HELP,
    CLI_OPT_END,
};

/* The model with the checkpoint's weights, written as llm.c's file. */
static int export_llmc(const export_opts *o, const char *model_path, const char *prog) {
    char err[1024];
    ampx_model *m    = NULL;
    ampx_backend *be = NULL;
    ampx_trainer *t  = NULL;
    int rc           = EXIT_FAILED;
    if (ampx_model_load(model_path, NULL, &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return EXIT_FAILED;
    }
    ampx_model_train_config(m)->skip_init = 1; /* the checkpoint overwrites every weight */
    if (ampx_backend_open(o->backend ? o->backend : "cpu", o->bopts.v, o->bopts.n, &be, err,
                          sizeof err) ||
        ampx_trainer_create_sampler(m, be, &t, err, sizeof err) ||
        ampx_trainer_load(t, o->checkpoint, err, sizeof err) ||
        ampx_trainer_export_llmc(t, o->output, o->dt, err, sizeof err))
        fprintf(stderr, "%s: %s\n", prog, err);
    else
        rc = 0;
    ampx_trainer_free(t);
    ampx_backend_close(be);
    ampx_model_free(m);
    return rc;
}

/* The output is not one of the inputs; 0, or EXIT_FAILED after one line. */
static int check_files(const export_opts *o, const char *model, const char *prog) {
    ampx_file_role out   = {o->output, "-o"};
    ampx_file_role in[2] = {{o->checkpoint, "--checkpoint"}, {model, "the model file"}};
    char err[1024];
    if (!ampx_check_outputs(&out, 1, in, 2, err, sizeof err)) return 0;
    fprintf(stderr, "%s: %s\n", prog, err);
    return EXIT_FAILED;
}

int cli_export(int argc, char **argv) {
    export_opts o = {.dt = AMPX_F32};
    cli_parser p  = {"o:h", export_table, 0, NULL};
    int rc        = cli_parse_or_usage(&p, argc, argv, &o, usage);
    if (rc >= 0) return rc;
    if (o.format && strcmp(o.format, "llmc") && strcmp(o.format, "safetensors")) {
        fprintf(stderr, "%s: --format '%s': expected safetensors or llmc\n", argv[0], o.format);
        return EXIT_USAGE;
    }
    if (o.format && !strcmp(o.format, "llmc")) {
        if (optind != argc - 1 || !o.checkpoint || !o.output) {
            fprintf(stderr,
                    "%s: --format llmc expects MODEL.json, --checkpoint FILE and --out "
                    "W.bin\n",
                    argv[0]);
            return EXIT_USAGE;
        }
        if (o.dt == AMPX_F16) {
            fprintf(stderr, "%s: --format llmc: --dtype is f32 or bf16\n", argv[0]);
            return EXIT_USAGE;
        }
        return check_files(&o, argv[optind], argv[0]) ? EXIT_FAILED
                                                      : export_llmc(&o, argv[optind], argv[0]);
    }
    if (o.backend || o.bopts.n) {
        fprintf(stderr, "%s: --backend applies to --format llmc\n", argv[0]);
        return EXIT_USAGE;
    }
    if (optind != argc || !o.checkpoint || !o.output) {
        fprintf(stderr, "%s: expected --checkpoint FILE and -o W.safetensors\n", argv[0]);
        return EXIT_USAGE;
    }
    if (check_files(&o, NULL, argv[0])) return EXIT_FAILED;
    char err[1024];
    if (ampx_checkpoint_export(o.checkpoint, o.output, o.dt, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        return EXIT_FAILED;
    }
    return 0;
}
