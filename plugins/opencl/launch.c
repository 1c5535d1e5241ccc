/* launch.c — setting kernel arguments, enqueueing kernels, device scratch buffers.
 *
 * Arguments are appended in the kernel's order; the first failing clSetKernelArg is kept and
 * reported, with the kernel's name, by the launch that follows, so an op's code reads as
 * the list of its kernel's parameters.
 */
#include <stdlib.h>
#include <string.h>

#include "ocl.h"

ocl_args ocl_args_begin(ampx_context *ctx, ocl_kernel k) {
    ampx_status st = ocl_program_ready(ctx); /* on a failure kernels[k] is NULL: st says why */
    return (ocl_args){ctx, ctx->kernels[k], ocl_kernel_names[k], 0, CL_SUCCESS, st, 0};
}

static void set_arg(ocl_args *a, size_t size, const void *value) {
    if (!a->kernel) return; /* a typed kernel that failed to build: st says so */
    cl_int err = clSetKernelArg(a->kernel, a->n, size, value);
    if (err != CL_SUCCESS && a->err == CL_SUCCESS) a->err = err;
    a->n++;
}

void ocl_arg_mem(ocl_args *a, cl_mem mem) {
    set_arg(a, sizeof(cl_mem), mem ? &mem : NULL);
}
void ocl_arg_u64(ocl_args *a, uint64_t v) {
    cl_ulong x = v;
    set_arg(a, sizeof x, &x);
}
void ocl_arg_u32(ocl_args *a, uint32_t v) {
    cl_uint x = v;
    set_arg(a, sizeof x, &x);
}
void ocl_arg_i32(ocl_args *a, int32_t v) {
    cl_int x = v;
    set_arg(a, sizeof x, &x);
}
void ocl_arg_f32(ocl_args *a, float v) {
    cl_float x = v;
    set_arg(a, sizeof x, &x);
}
void ocl_arg_local(ocl_args *a, size_t bytes) {
    set_arg(a, bytes, NULL);
}
void ocl_arg_tensor(ocl_args *a, const ampx_tensor *t) {
    ocl_arg_mem(a, t && t->buf ? t->buf->mem : NULL);
    ocl_arg_u64(a, t && t->buf ? t->offset : 0);
    ocl_arg_i32(a, t && t->buf ? (int32_t)t->dtype : 0);
}
void ocl_arg_fixed(ocl_args *a, const ampx_tensor *t) {
    ocl_arg_mem(a, t && t->buf ? t->buf->mem : NULL);
    ocl_arg_u64(a, t && t->buf ? t->offset : 0);
}

ampx_status ocl_launch_nd(ocl_args *a, cl_uint dims, const size_t *global, const size_t *local) {
    const char *name = a->name;
    if (a->st != AMPX_OK) return a->st;
    if (a->err != CL_SUCCESS)
        return ocl_fail(a->ctx, ocl_status_of(a->err), "%s: clSetKernelArg(%s, %u): %s", name, name,
                        a->n, ocl_err_name(a->err));
    ampx_context *ctx = a->ctx;
    ocl_thread_enter(ctx);
    cl_event ev = NULL;
    int keep    = ctx->prof.on && ctx->prof.n_ops < ctx->prof.cap;
    if (keep && ctx->prof.n_events == ctx->prof.cap_events) { /* grow the event list */
        uint32_t nc = ctx->prof.cap_events ? 2 * ctx->prof.cap_events : 256;
        cl_event *e = realloc(ctx->prof.events, sizeof *e * nc);
        if (e) ctx->prof.events = e, ctx->prof.cap_events = nc;
        keep = e != NULL;
    }
    cl_int err = clEnqueueNDRangeKernel(ctx->queue, a->kernel, dims, NULL, global, local, 0, NULL,
                                        keep ? &ev : NULL);
    if (err == CL_SUCCESS && keep && ev) ctx->prof.events[ctx->prof.n_events++] = ev;
    if (err != CL_SUCCESS)
        return ocl_fail(a->ctx, ocl_status_of(err), "%s: clEnqueueNDRangeKernel(%s): %s", name,
                        name, ocl_err_name(err));
    return AMPX_OK;
}

ampx_status ocl_launch_1d(ocl_args *a, uint64_t work) {
    size_t local = 64;
    uint64_t g   = (work + local - 1) / local * local;
    if (g == 0) g = local;
    if (g > a->ctx->max_items) g = a->ctx->max_items / local * local;
    size_t global = (size_t)g;
    return ocl_launch_nd(a, 1, &global, &local);
}

ampx_status ocl_launch_groups(ocl_args *a, uint64_t groups) {
    size_t local = a->ctx->wg;
    if (groups == 0) groups = 1; /* kernels take exactly one group per row or channel */
    size_t global = (size_t)groups * local;
    return ocl_launch_nd(a, 1, &global, &local);
}

ampx_status ocl_launch_groups_of(ocl_args *a, uint64_t groups, size_t local) {
    if (groups == 0) groups = 1;
    size_t global = (size_t)groups * local;
    return ocl_launch_nd(a, 1, &global, &local);
}

ampx_status ocl_launch_rows(ocl_args *a, uint64_t rows) {
    if (!a->row_items) return ocl_launch_groups(a, rows);
    /* work-groups of one item: PoCL runs each as a plain call, and any number of rows
     * spreads over every core (groups of 4 or 16 items measured the same) */
    size_t local  = 1;
    size_t global = (size_t)(rows < a->ctx->max_items ? (rows ? rows : 1) : a->ctx->max_items);
    return ocl_launch_nd(a, 1, &global, &local);
}

ampx_status ocl_launch_single(ocl_args *a) {
    size_t one = 1;
    return ocl_launch_nd(a, 1, &one, &one);
}

cl_mem ocl_scratch_get(ampx_context *ctx, const char *opname, unsigned slot, size_t bytes) {
    ocl_scratch *s = &ctx->scratch[slot];
    if (bytes == 0) bytes = 1;
    if (s->mem && s->bytes >= bytes) return s->mem;
    if (bytes > ctx->max_alloc) {
        ocl_fail(ctx, AMPX_ERR_NO_MEMORY,
                 "%s: scratch of %zu bytes exceeds the device's largest allocation (%llu bytes)",
                 opname, bytes, (unsigned long long)ctx->max_alloc);
        return NULL;
    }
    if (s->mem) clReleaseMemObject(s->mem); /* kept alive by OpenCL until its commands end */
    s->mem       = NULL;
    s->bytes     = 0;
    size_t grown = bytes < 4096 ? 4096 : bytes;
    cl_int err;
    cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, grown, NULL, &err);
    if (err != CL_SUCCESS) {
        ocl_check(ctx, err, opname, "clCreateBuffer(scratch)");
        return NULL;
    }
    s->mem   = m;
    s->bytes = grown;
    return m;
}

void ocl_scratch_free(ampx_context *ctx) {
    for (int i = 0; i < OCL_N_SCRATCH; i++)
        if (ctx->scratch[i].mem) clReleaseMemObject(ctx->scratch[i].mem);
    memset(ctx->scratch, 0, sizeof ctx->scratch);
}
