/* files.c — the files a loaded model reads: the model file and its data files, for the
 * same-file check of a command's outputs (ampx_check_outputs). */
#include "ampx/train.h"
#include "passes/model.h"

int ampx_model_inputs(const ampx_model *m, ampx_file_role *out, int cap) {
    const data_config *d       = &m->cfg.data;
    const ampx_file_role all[] = {
        {m->cfg.file, "the model file"},
        {d->train_images, "the model's data.train_images"},
        {d->train_labels, "the model's data.train_labels"},
        {d->test_images, "the model's data.test_images"},
        {d->test_labels, "the model's data.test_labels"},
        {d->train_csv, "the model's data.train"},
        {d->test_csv, "the model's data.test"},
        {d->text_train, "the model's data.train"},
        {d->text_val, "the model's data.val"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i].path && n < cap) out[n++] = all[i];
    return n;
}
