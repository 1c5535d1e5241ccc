/* export.c — `ampx export`: the weights of a checkpoint as a plain safetensors file.
 *
 *   ampx export --checkpoint F -o W.safetensors [--dtype f32|bf16|f16]
 *
 * Parameters and running statistics under their names (a dense weight [in, out]), no
 * optimizer state, no loss-scaler state: what the safetensors reference reader and PyTorch's
 * safetensors.torch.load_file read, and what `ampx train --init-from` starts from. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "ampx/dtype.h"
#include "ampx/train.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ampx export --checkpoint FILE -o W.safetensors [--dtype f32|bf16|f16]\n"
               "The weights of a checkpoint (no optimizer state) as a plain safetensors file.\n");
}

int cli_export(int argc, char **argv) {
    static struct option lopts[] = {{"checkpoint", required_argument, 0, 'c'},
                                    {"output", required_argument, 0, 'o'},
                                    {"dtype", required_argument, 0, 'd'},
                                    {"help", no_argument, 0, 'h'},
                                    {0, 0, 0, 0}};
    const char *ckpt = NULL, *out = NULL;
    ampx_dtype dt = AMPX_F32;
    int c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, "o:h", lopts)) != -1) {
        switch (c) {
        case 'c': ckpt = optarg; break;
        case 'o': out = optarg; break;
        case 'd':
            if (!strcmp(optarg, "f32"))
                dt = AMPX_F32;
            else if (!strcmp(optarg, "bf16"))
                dt = AMPX_BF16;
            else if (!strcmp(optarg, "f16"))
                dt = AMPX_F16;
            else {
                fprintf(stderr, "%s: --dtype '%s': expected f32, bf16 or f16\n", argv[0], optarg);
                return EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind != argc || !ckpt || !out) {
        fprintf(stderr, "%s: expected --checkpoint FILE and -o W.safetensors\n", argv[0]);
        return EXIT_USAGE;
    }
    char err[1024];
    if (ampx_checkpoint_export(ckpt, out, dt, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        return EXIT_FAILED;
    }
    return 0;
}
