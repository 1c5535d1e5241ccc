/* data_entry.c — exports ampx_backend_entry, but as data, not a function: calling it would
 * jump into a data page. The loader must refuse it by the symbol's type. */
__attribute__((visibility("default"))) int ampx_backend_entry[4] = {1, 0, 0, 0};
