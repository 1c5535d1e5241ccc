/* fuzz_policy.c — the policy and scaler parser: any --policy file for models/mlp.json. */
#include <stdint.h>
#include <string.h>

#include "ampx/train.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[1024];
    ampx_model *m = NULL;
    if (ampx_model_load(AMPX_SOURCE_DIR "/models/mlp.json", fuzz_file(data, size), &m, err,
                        sizeof err) == AMPX_OK)
        ampx_model_free(m);
    else if (!err[0] || strchr(err, '\n'))
        abort();
    return 0;
}
