/* guard.c — the call into a plugin in flight and the handlers that name it (see guard.h). */
#include "backend/guard.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------
// The record: written by the thread that calls into the plugin, read by a handler on any
// thread (a plugin's worker may be the one that faults), so every field is volatile and
// `active` is written last on enter and first on leave.

static struct {
    const char *volatile plugin, *volatile path, *volatile call, *volatile who;
    volatile sig_atomic_t active;
} in_flight;

static const int fault_signals[]       = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static const char *const fault_names[] = {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"};
enum { N_SIGNALS = sizeof fault_signals / sizeof fault_signals[0] };
static struct sigaction previous[N_SIGNALS];

void guard_enter(guard_call *saved, const char *plugin, const char *path, const char *call,
                 const char *who) {
    saved->plugin    = in_flight.plugin;
    saved->path      = in_flight.path;
    saved->call      = in_flight.call;
    saved->who       = in_flight.who;
    saved->active    = in_flight.active;
    in_flight.active = 0;
    in_flight.plugin = plugin;
    in_flight.path   = path;
    in_flight.call   = call;
    in_flight.who    = who;
    in_flight.active = 1;
}

void guard_leave(const guard_call *saved) {
    in_flight.active = 0;
    in_flight.plugin = saved->plugin;
    in_flight.path   = saved->path;
    in_flight.call   = saved->call;
    in_flight.who    = saved->who;
    in_flight.active = saved->active;
}

// ---------------------------------------------------------------------------------------
// The line: built with async-signal-safe calls alone

static size_t put(char *buf, size_t n, size_t cap, const char *s) {
    while (s && *s && n + 1 < cap)
        buf[n++] = *s++;
    return n;
}

/* "ampx: <what> backend 'NAME' (PATH) <how> CALL[ issued by WHO]\n" to stderr. */
static void say(const char *what, const char *how) {
    char msg[1400];
    size_t n = 0;
    n        = put(msg, n, sizeof msg, "ampx: ");
    n        = put(msg, n, sizeof msg, what);
    n        = put(msg, n, sizeof msg, "backend '");
    n        = put(msg, n, sizeof msg, in_flight.plugin);
    n        = put(msg, n, sizeof msg, "' (");
    n        = put(msg, n, sizeof msg, in_flight.path);
    n        = put(msg, n, sizeof msg, ") ");
    n        = put(msg, n, sizeof msg, how);
    n        = put(msg, n, sizeof msg, in_flight.call);
    if (in_flight.who) {
        n = put(msg, n, sizeof msg, " issued by ");
        n = put(msg, n, sizeof msg, in_flight.who);
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
    if (in_flight.active) {
        char what[32];
        size_t n         = put(what, 0, sizeof what, fault_names[k]);
        n                = put(what, n, sizeof what, " inside ");
        what[n]          = 0;
        in_flight.active = 0; /* one line, whatever the previous handler does next */
        say(what, "during ");
    }
    sigaction(sig, &previous[k], NULL);
    if (si->si_code <= 0 || sig == SIGABRT) raise(sig); /* nothing to re-execute */
}

/* exit() called by a plugin inside a call (the host never exits while a call is in flight). */
static void on_exit_in_flight(void) {
    if (!in_flight.active) return;
    say("", "called exit() during ");
    fflush(NULL);
    _exit(70); /* EX_SOFTWARE: never the plugin's status, which may read as success */
}

static void install(void) {
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
