/* no_entry.c — a shared object that is not an ampx backend: it lacks ampx_backend_entry. */
__attribute__((visibility("default"))) int ampx_not_the_entry(void) {
    return 42;
}
