/* keeper.c — the checkpoints of an `ampx train` run: their names, the lock that keeps two
 * runs from writing one checkpoint path, the last K periodic checkpoints (named by step) and
 * the best by validation loss. The keeper's state (the best loss and its step, the steps of
 * the periodic files) is the trainer's, saved in every checkpoint, so a resumed run
 * continues it; only files of the run and the runs it resumes are removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keeper.h"

void ckpt_name(const char *base, const char *tag, char *out, size_t cap) {
    size_t n = strlen(base), ext = strlen(".safetensors");
    if (n > ext && !strcmp(base + n - ext, ".safetensors"))
        snprintf(out, cap, "%.*s.%s.safetensors", (int)(n - ext), base, tag);
    else
        snprintf(out, cap, "%s.%s", base, tag);
}

void ckpt_step_name(const char *base, int64_t step, char *out, size_t cap) {
    char tag[32];
    snprintf(tag, sizeof tag, "step%06lld", (long long)step);
    ckpt_name(base, tag, out, cap);
}

int keeper_save_periodic(ckpt_keeper *kp, ampx_trainer *t, char *err, size_t cap) {
    if (!kp->keep) return ampx_trainer_save(t, kp->base, err, cap) ? -1 : 0;
    ampx_keeper *k = kp->k;
    int64_t step   = ampx_trainer_step(t);
    if (k->n_kept > 0 && k->kept[k->n_kept - 1] == step) return 0; /* this step's is there */
    char path[4096];
    ckpt_step_name(kp->base, step, path, sizeof path);
    /* the state the file holds is the one after this save: the step in, the oldest out */
    int64_t drop[AMPX_KEEP_MAX];
    int n_drop = 0, n = k->n_kept;
    k->kept[k->n_kept++] = step;
    while (k->n_kept > kp->keep) {
        drop[n_drop++] = k->kept[0];
        memmove(k->kept, k->kept + 1, sizeof k->kept[0] * (size_t)--k->n_kept);
    }
    if (ampx_trainer_save(t, path, err, cap)) {
        memmove(k->kept + n_drop, k->kept, sizeof k->kept[0] * (size_t)(n - n_drop));
        memcpy(k->kept, drop, sizeof drop[0] * (size_t)n_drop);
        k->n_kept = n;
        return -1;
    }
    for (int i = 0; i < n_drop; i++) {
        ckpt_step_name(kp->base, drop[i], path, sizeof path);
        unlink(path);
    }
    return 0;
}

int keeper_save_best(ckpt_keeper *kp, ampx_trainer *t, double loss, char *err, size_t cap) {
    ampx_keeper *k = kp->k;
    if (!kp->base || !(loss < k->best_loss)) return 0;
    char path[4096];
    ckpt_name(kp->base, "best", path, sizeof path);
    double was_loss = k->best_loss;
    int64_t was_at  = k->best_step;
    k->best_loss = loss, k->best_step = ampx_trainer_step(t);
    if (ampx_trainer_save(t, path, err, cap)) {
        k->best_loss = was_loss, k->best_step = was_at;
        return -1;
    }
    return 0;
}

static int cmp_step(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Splits path into its folder (".": none) and file name. */
static const char *split(const char *path, char *dir, size_t cap) {
    snprintf(dir, cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) {
        snprintf(dir, cap, ".");
        return path;
    }
    slash[slash == dir] = 0; /* "/F": the root */
    return strrchr(path, '/') + 1;
}

/* The step of file name nm when it is a periodic checkpoint's name of checkpoint file name
 * file (the name ckpt_step_name gives), else -1. */
static int64_t periodic_step(const char *nm, const char *file) {
    char stem[4096], probe[4096];
    ckpt_step_name(file, 0, stem, sizeof stem); /* "F.step000000.safetensors": the pattern */
    const char *at = strstr(stem, ".step000000");
    if (!at) return -1;
    size_t pre = (size_t)(at - stem) + 5;
    if (strncmp(nm, stem, pre) || nm[pre] < '0' || nm[pre] > '9') return -1;
    char *end;
    errno       = 0;
    long long s = strtoll(nm + pre, &end, 10);
    if (errno || s < 1) return -1;
    ckpt_step_name(file, s, probe, sizeof probe);
    return strcmp(probe, nm) ? -1 : s;
}

/* A checkpoint written before the keeper's state was saved: the periodic files beside base
 * named by a step up to the resumed one (the predecessor's, under the lock's protection)
 * become the run's, the newest AMPX_KEEP_MAX - 1 of them. */
static void adopt_periodic(ampx_keeper *k, const char *base, int64_t step) {
    char dir[4096];
    const char *file = split(base, dir, sizeof dir);
    DIR *d           = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int64_t s = periodic_step(e->d_name, file);
        if (s < 1 || s > step) continue;
        if (k->n_kept == AMPX_KEEP_MAX - 1) {
            qsort(k->kept, (size_t)k->n_kept, sizeof k->kept[0], cmp_step);
            if (s < k->kept[0]) continue;
            k->kept[0] = s;
        } else {
            k->kept[k->n_kept++] = s;
        }
    }
    if (d) closedir(d);
    qsort(k->kept, (size_t)k->n_kept, sizeof k->kept[0], cmp_step);
}

/* Whether checkpoint resume is one of base's own files: base itself, its best or one of
 * its periodic checkpoints, in the same folder. */
static int same_lineage(const char *resume, const char *base) {
    char rdir[4096], bdir[4096], rreal[PATH_MAX], breal[PATH_MAX], best[4096];
    const char *rfile = split(resume, rdir, sizeof rdir), *bfile = split(base, bdir, sizeof bdir);
    if (!realpath(rdir, rreal) || !realpath(bdir, breal) || strcmp(rreal, breal)) return 0;
    ckpt_name(bfile, "best", best, sizeof best);
    return !strcmp(rfile, bfile) || !strcmp(rfile, best) || periodic_step(rfile, bfile) > 0;
}

/* The keeper of a run writing checkpoints to base: a run resumed from one of base's own
 * checkpoints continues the state that checkpoint holds; else the state starts empty (best
 * +inf), and a run resumed from a checkpoint of base written before the state was saved
 * adopts the periodic files of base's name up to its step. */
void keeper_start(ckpt_keeper *kp, ampx_trainer *t, const char *base, const char *resume,
                  int64_t keep) {
    ampx_keeper *k = ampx_trainer_keeper(t);
    kp->k = k, kp->base = base, kp->keep = keep;
    int own = resume && same_lineage(resume, base), loaded = k->loaded;
    if (!own || !loaded) *k = (ampx_keeper){.best_loss = INFINITY, .best_step = -1};
    if (own && !loaded) adopt_periodic(k, base, ampx_trainer_step(t));
}

/* An exclusive lock on the checkpoint path (flock on F.lock beside it, held for the run's
 * life): a second run writing the same checkpoints is refused at its start, not found later
 * with the two runs' files mixed. The lock file is removed at the end (a killed run leaves
 * it, unlocked); a lock taken on a file that was removed meanwhile is taken again on the new
 * one, so two runs never hold two files of one name. */
int keeper_lock(const char *ckpt, int *fd, char *err, size_t cap) {
    char lock[4096];
    if (snprintf(lock, sizeof lock, "%s.lock", ckpt) >= (int)sizeof lock) {
        snprintf(err, cap, "%s: path too long for its lock file", ckpt);
        return -1;
    }
    for (int tries = 0; tries < 100; tries++) {
        *fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (*fd < 0) {
            snprintf(err, cap, "%s: cannot create the lock file %s: %s", ckpt, lock,
                     strerror(errno));
            return -1;
        }
        if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
            char pid[32]            = "";
            ssize_t n               = pread(*fd, pid, sizeof pid - 1, 0);
            pid[n > 0 ? n : 0]      = 0;
            pid[strcspn(pid, "\n")] = 0;
            snprintf(err, cap,
                     "%s: in use by another ampx train%s%s%s (%s is locked): give this run "
                     "another --checkpoint",
                     ckpt, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "", lock);
            close(*fd);
            *fd = -1;
            return -1;
        }
        struct stat held, now;
        if (fstat(*fd, &held) == 0 && stat(lock, &now) == 0 && held.st_dev == now.st_dev &&
            held.st_ino == now.st_ino)
            break;
        close(*fd); /* the file was removed by the run that held it: the new one */
        *fd = -1;
    }
    if (*fd < 0) {
        snprintf(err, cap, "%s: cannot lock %s", ckpt, lock);
        return -1;
    }
    /* the pid is for a refused run's message; the lock holds without it */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(*fd, 0) == 0 && pwrite(*fd, pid, (size_t)n, 0) != n) pid[0] = 0;
    return 0;
}

void keeper_unlock(const char *ckpt, int fd) {
    char lock[4096];
    if (fd < 0) return;
    if (snprintf(lock, sizeof lock, "%s.lock", ckpt) < (int)sizeof lock) unlink(lock);
    close(fd);
}
