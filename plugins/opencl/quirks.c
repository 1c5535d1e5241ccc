/* quirks.c — workarounds for bugs of particular OpenCL implementations, each named with the
 * implementation and version it was seen on and the test that shows it. (Bugs that a kernel
 * works around are noted in the kernel: common.cl's f16_to_f32, typed/amp_reduce.cl's ONES.)
 *
 * Oclgrind 21.10, `oclgrind --uninitialized`: its Uninitialized plugin keeps the pool it
 * allocates shadow values from in a thread-local variable, created by the thread that
 * creates the cl_context (each cl_context is an oclgrind::Context with its own plugins) and
 * counted per thread. Any other thread that makes the queue run (a blocking write or read,
 * clFinish: Oclgrind runs commands on the thread that waits for them) dereferences that
 * thread's null pool: SIGSEGV in MemoryPool::alloc from Uninitialized::hostMemoryStore, at the
 * first buffer_write, since ampx's loader runs create() on a thread of its own (its deadline)
 * and the ops on the caller's. So on Oclgrind each thread that uses a context first creates
 * a cl_context of its own, kept for the life of the process (it only holds a pool: one per
 * thread), and contexts are never released: releasing one frees the pool of the thread that
 * releases it, which may still be in use. tests/opencl/oclgrind/uninitialized_thread.sh
 * shows it (and that it still crashes without the workaround, AMPX_OPENCL_QUIRKS=off). */
#include <stdlib.h>
#include <string.h>

#include "ocl.h"

static _Thread_local cl_context thread_keepalive; /* this thread's context (Oclgrind) */

int ocl_quirks_oclgrind(const char *platform_name) {
    const char *off = getenv("AMPX_OPENCL_QUIRKS");
    if (off && strcmp(off, "off") == 0) return 0;
    return strstr(platform_name, "Oclgrind") != NULL;
}

void ocl_thread_enter(ampx_context *ctx) {
    if (!ctx->oclgrind || thread_keepalive) return;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
    cl_int err;
    thread_keepalive = clCreateContext(props, 1, &ctx->device, NULL, NULL, &err);
    if (err != CL_SUCCESS) thread_keepalive = NULL; /* then it is tried again next time */
}

void ocl_release_context(ampx_context *ctx) {
    if (ctx->cl && !ctx->oclgrind) clReleaseContext(ctx->cl);
    ctx->cl = NULL;
}
