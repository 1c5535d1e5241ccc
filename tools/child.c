/* child.c — a function run in a child process with a deadline, what it writes to stdout and
 * stderr captured: for work that calls into code the command cannot trust to return (a
 * plugin's create(), its device_info and supports for `ampx backends`). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static long ms_since(const struct timespec *t0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) * 1000L + (now.tv_nsec - t0->tv_nsec) / 1000000L;
}

/* Appends what fd has to *buf (up to cap - 1 bytes kept); 0 at end of file. */
static int drain(int fd, char **buf, size_t *n, size_t cap) {
    char chunk[4096];
    ssize_t k = read(fd, chunk, sizeof chunk);
    if (k < 0 && errno == EINTR) return 1;
    if (k <= 0) return 0;
    if (!*buf) *buf = calloc(1, cap);
    size_t take = *buf && *n + (size_t)k < cap ? (size_t)k : (*buf ? cap - 1 - *n : 0);
    if (take) memcpy(*buf + *n, chunk, take), *n += take;
    return 1;
}

static void child_body(int out_fd, int err_fd, void (*fn)(void *), void *arg) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    close(out_fd), close(err_fd);
    fn(arg);
    fflush(NULL);
    _exit(0);
}

int cli_run_child(void (*fn)(void *), void *arg, int timeout_s, cli_child *r) {
    memset(r, 0, sizeof *r);
    int po[2], pe[2];
    fflush(NULL); /* nothing buffered is written twice */
    if (pipe(po)) return -1;
    if (pipe(pe)) {
        close(po[0]), close(po[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
        return -1;
    }
    if (pid == 0) {
        close(po[0]), close(pe[0]);
        child_body(po[1], pe[1], fn, arg);
    }
    close(po[1]), close(pe[1]);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t n_err = 0;
    int open_out = 1, open_err = 1;
    while (open_out || open_err) {
        long left           = timeout_s * 1000L - ms_since(&t0);
        struct pollfd pf[2] = {{.fd = open_out ? po[0] : -1, .events = POLLIN},
                               {.fd = open_err ? pe[0] : -1, .events = POLLIN}};
        int k               = left > 0 ? poll(pf, 2, (int)left) : 0;
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            r->timed_out = 1;
            break;
        }
        if (pf[0].revents) open_out = drain(po[0], &r->out, &r->n_out, 1 << 22);
        if (pf[1].revents) open_err = drain(pe[0], &r->err, &n_err, 4096);
    }
    close(po[0]), close(pe[0]);
    if (r->timed_out) kill(pid, SIGKILL);
    while (waitpid(pid, &r->status, 0) < 0 && errno == EINTR) {
    }
    return 0;
}

void cli_child_free(cli_child *r) {
    free(r->out), free(r->err);
    r->out = r->err = NULL;
}
