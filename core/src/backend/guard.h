/* guard.h — the call into a plugin in flight, for the process's last line when a plugin
 * takes it down. The loader (create, the buffer calls, synchronize, destroy) and the call
 * layer (every op) mark each call into a plugin; when the process dies inside one — a fault
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL), abort() (SIGABRT) or exit() — one line on stderr names
 * the plugin, its path and the call:
 *   ampx: SIGSEGV inside backend 'cpu' (/x/libampx-cpu.so) during op gemm issued by fc1
 *   ampx: backend 'cpu' (/x/libampx-cpu.so) called exit() during buffer_read
 * A fault or abort then meets the handler that was there before (the default, or a
 * sanitizer's); exit() inside a plugin call ends the process with status 70 (EX_SOFTWARE),
 * whatever status the plugin gave, so a run a plugin ended never reads as a success.
 * The record is per thread: trainers on several threads each have their own call in flight,
 * and a host thread's exit() while another thread is inside a plugin blames no plugin. */
#ifndef AMPX_BACKEND_GUARD_H
#define AMPX_BACKEND_GUARD_H

/* The record of the call in flight; a guard_enter's caller keeps the one it replaced. */
typedef struct guard_call {
    const char *plugin, *path; /* the plugin's name and file */
    const char *call;          /* "op gemm", "buffer_read", "create", ... */
    const char *who;           /* (optional) what issued it: a graph node, "step" */
    int active;
} guard_call;

/* Installs the handlers (once; later calls do nothing). */
void guard_install(void);
/* Marks a call as in flight; *saved gets the record it replaces (calls do not nest today,
 * but a log callback could). */
void guard_enter(guard_call *saved, const char *plugin, const char *path, const char *call,
                 const char *who);
/* Puts back the record guard_enter replaced. */
void guard_leave(const guard_call *saved);

#endif
