/* guard.c — the call into a plugin in flight and the handlers that name it (see guard.h). */
#include "backend/guard.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------
// The records: one per thread that calls into a plugin (two trainers on two threads each
// have a call in flight of their own). A thread claims a slot of the table on its first
// call and gives it back when it ends. Each slot is written by its thread alone and read by
// a handler on any thread (a plugin's worker may be the one that faults), so its fields are
// volatile and `active` is written last on enter and first on leave.

typedef struct record {
    const char *volatile plugin, *volatile path, *volatile call, *volatile who;
    volatile sig_atomic_t active;
    pthread_t owner;  /* valid while taken */
    atomic_int taken; /* 0 free, 1 owned by a thread */
} record;

enum { N_RECORDS = 256 };
static record records[N_RECORDS];
/* The calling thread's slot (NULL until its first call). A thread that finds the table full
 * keeps its record here instead, seen by its own handlers only. */
static _Thread_local record *mine;
static _Thread_local record spare;
static pthread_key_t release_key;

static const int fault_signals[]       = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static const char *const fault_names[] = {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"};
enum { N_SIGNALS = sizeof fault_signals / sizeof fault_signals[0] };
static struct sigaction previous[N_SIGNALS];

/* At a thread's end: its slot is free again (it has no call in flight: it has returned). */
static void release(void *slot) {
    record *r = slot;
    r->active = 0;
    atomic_store_explicit(&r->taken, 0, memory_order_release);
}

static record *claim(void) {
    guard_install(); /* the key that gives the slot back */
    for (int k = 0; k < N_RECORDS; k++) {
        int free_slot = 0;
        if (atomic_load_explicit(&records[k].taken, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&records[k].taken, &free_slot, 1)) {
            records[k].active = 0;
            records[k].owner  = pthread_self();
            pthread_setspecific(release_key, &records[k]);
            return &records[k];
        }
    }
    return &spare;
}

void guard_enter(guard_call *saved, const char *plugin, const char *path, const char *call,
                 const char *who) {
    record *r = mine;
    if (!r) r = mine = claim();
    saved->plugin = r->plugin;
    saved->path   = r->path;
    saved->call   = r->call;
    saved->who    = r->who;
    saved->active = r->active;
    r->active     = 0;
    r->plugin     = plugin;
    r->path       = path;
    r->call       = call;
    r->who        = who;
    r->active     = 1;
}

void guard_leave(const guard_call *saved) {
    record *r = mine;
    if (!r) return; /* no enter on this thread */
    r->active = 0;
    r->plugin = saved->plugin;
    r->path   = saved->path;
    r->call   = saved->call;
    r->who    = saved->who;
    r->active = saved->active;
}

/* In a handler (async-signal-safe: no thread-local access, which may allocate on a thread
 * that never made a call): this thread's record when it has a call in flight. Else, when
 * `any` allows, the only call in flight on another thread: a plugin's own thread faulting or
 * exiting inside its caller's call (create() runs on a thread of its own under its deadline).
 * ANY_FAULT: any thread; ANY_EXIT: a thread that is not the main one and never called into
 * a plugin itself (a host thread that ends the process while another thread trains is not
 * a plugin's doing). NULL when none, or when several are in flight elsewhere. */
enum { OWN_ONLY, ANY_EXIT, ANY_FAULT };

static record *in_flight(int any) {
    pthread_t self = pthread_self();
    record *other  = NULL;
    int n_other = 0, caller = 0;
    for (int k = 0; k < N_RECORDS; k++) {
        record *r = &records[k];
        if (!atomic_load_explicit(&r->taken, memory_order_acquire)) continue;
        if (pthread_equal(r->owner, self)) {
            if (r->active) return r;
            caller = 1;
        } else if (r->active) {
            other = r;
            n_other++;
        }
    }
    if (any == ANY_EXIT && (caller || (pid_t)syscall(SYS_gettid) == getpid())) return NULL;
    return any != OWN_ONLY && n_other == 1 ? other : NULL;
}

// ---------------------------------------------------------------------------------------
// The line: built with async-signal-safe calls alone

static size_t put(char *buf, size_t n, size_t cap, const char *s) {
    while (s && *s && n + 1 < cap)
        buf[n++] = *s++;
    return n;
}

/* "ampx: <what> backend 'NAME' (PATH) <how> CALL[ issued by WHO]\n" to stderr. */
static void say(const record *r, const char *what, const char *how) {
    char msg[1400];
    size_t n = 0;
    n        = put(msg, n, sizeof msg, "ampx: ");
    n        = put(msg, n, sizeof msg, what);
    n        = put(msg, n, sizeof msg, "backend '");
    n        = put(msg, n, sizeof msg, r->plugin);
    n        = put(msg, n, sizeof msg, "' (");
    n        = put(msg, n, sizeof msg, r->path);
    n        = put(msg, n, sizeof msg, ") ");
    n        = put(msg, n, sizeof msg, how);
    n        = put(msg, n, sizeof msg, r->call);
    if (r->who) {
        n = put(msg, n, sizeof msg, " issued by ");
        n = put(msg, n, sizeof msg, r->who);
    }
    n         = put(msg, n, sizeof msg, "\n");
    ssize_t w = write(2, msg, n);
    (void)w;
}

/* A fault or abort inside a plugin call: the line, then the handler that was there before
 * takes its course (a fault re-executes and meets it; a sent signal is raised again). */
static void on_fault(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    int k = 0;
    while (k < N_SIGNALS - 1 && fault_signals[k] != sig)
        k++;
    record *r = in_flight(ANY_FAULT);
    if (r) {
        char what[32];
        size_t n  = put(what, 0, sizeof what, fault_names[k]);
        n         = put(what, n, sizeof what, " inside ");
        what[n]   = 0;
        r->active = 0; /* one line, whatever the previous handler does next */
        say(r, what, "during ");
    }
    sigaction(sig, &previous[k], NULL);
    if (si->si_code <= 0 || sig == SIGABRT) raise(sig); /* nothing to re-execute */
}

/* exit() called by a plugin inside a call (the host never exits while one of its own calls is
 * in flight; see in_flight for a call in flight on another thread). */
static void on_exit_in_flight(void) {
    record *r = in_flight(ANY_EXIT);
    if (!r) return;
    say(r, "", "called exit() during ");
    fflush(NULL);
    _exit(70); /* EX_SOFTWARE: never the plugin's status, which may read as success */
}

static void install(void) {
    pthread_key_create(&release_key, release);
    for (int k = 0; k < N_SIGNALS; k++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags     = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(fault_signals[k], &sa, &previous[k]);
    }
    atexit(on_exit_in_flight);
}

void guard_install(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install);
}
