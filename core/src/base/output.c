/* output.c — writing a file whole or not at all, and never over an input (output.h). */
#include "base/output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

// ---------------------------------------------------------------------------------------
// The temporary file beside the target

/* Splits path into its folder and file name; -1 if the temporary name would not fit. */
static int split_path(const char *path, char *dir, char *base, size_t cap) {
    char a[PATH_MAX], b[PATH_MAX];
    if (snprintf(a, sizeof a, "%s", path) >= (int)sizeof a) return -1;
    memcpy(b, a, sizeof b);
    if (snprintf(dir, cap, "%s", dirname(a)) >= (int)cap) return -1;
    if (snprintf(base, cap, "%s", basename(b)) >= (int)cap) return -1;
    /* the folder, "/.", the name, ".tmp.", a pid and ".XXXXXX" must fit PATH_MAX */
    return strlen(dir) + strlen(base) + 40 < PATH_MAX && strlen(base) + 40 < NAME_MAX ? 0 : -1;
}

/* Removes ".BASE.tmp.PID.*" files in dir that a process no longer running left behind. */
static void remove_stale(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    if (!d) return;
    char prefix[NAME_MAX + 1];
    int np = snprintf(prefix, sizeof prefix, ".%s.tmp.", base);
    if (np < 0 || np >= (int)sizeof prefix) {
        closedir(d);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, (size_t)np)) continue;
        char *end;
        long pid = strtol(e->d_name + np, &end, 10);
        if (pid <= 0 || *end != '.' || strlen(end) != 7) continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == geteuid())
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

int out_temp(const char *path, const char *what, char *tmp, size_t cap, ampx_err e) {
    char dir[PATH_MAX], base[PATH_MAX];
    if (split_path(path, dir, base, sizeof dir)) {
        err_set(e, "%.200s...: path too long for %s", path, what);
        return -1;
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        err_set(e, "%s: not a regular file; %s would replace it", path, what);
        return -1;
    }
    remove_stale(dir, base);
    int len = snprintf(tmp, cap, "%s/.%s.tmp.%ld.XXXXXX", dir, base, (long)getpid());
    if (len < 0 || (size_t)len >= cap) {
        err_set(e, "%.200s...: path too long for %s", path, what);
        return -1;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        err_set(e, "%s: %s (cannot create a file in %s)", path, strerror(errno), dir);
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    return fd;
}

ampx_status out_sync_folder(const char *path, ampx_err e) {
    char dir[PATH_MAX], base[PATH_MAX];
    if (split_path(path, dir, base, sizeof dir)) snprintf(dir, sizeof dir, ".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        err_set(e, "%s: cannot sync folder %s: %s", path, dir, strerror(errno));
        if (dfd >= 0) close(dfd);
        return AMPX_ERR_INVALID;
    }
    close(dfd);
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// An output written whole: ampx_output_*

struct ampx_output {
    FILE *f;
    int in_place;            /* a pipe or a device: written where it is */
    char path[PATH_MAX];     /* the target */
    char tmp[PATH_MAX + 64]; /* the temporary file (when not in place) */
};

/* A target that is there and is a pipe or a character device: opened as it is. */
static int open_in_place(ampx_output *o, const char *path, ampx_err e) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
        err_set(e, "%s: not a regular file, a pipe or a device; cannot write it", path);
        return -1;
    }
    o->f = fopen(path, "w");
    if (!o->f) {
        err_set(e, "%s: %s", path, strerror(errno));
        return -1;
    }
    o->in_place = 1;
    return 1;
}

ampx_status ampx_output_open(const char *path, ampx_output **out, char *err, size_t cap) {
    *out           = NULL;
    ampx_output *o = calloc(1, sizeof *o);
    if (!o) {
        err_set(ERR(err, cap), "%s: out of memory", path);
        return AMPX_ERR_INVALID;
    }
    if (snprintf(o->path, sizeof o->path, "%s", path) >= (int)sizeof o->path) {
        err_set(ERR(err, cap), "%.200s...: path too long for an output", path);
        free(o);
        return AMPX_ERR_INVALID;
    }
    int r = open_in_place(o, path, ERR(err, cap));
    if (r < 0) {
        free(o);
        return AMPX_ERR_INVALID;
    }
    if (r == 0) {
        int fd = out_temp(path, "an output", o->tmp, sizeof o->tmp, ERR(err, cap));
        if (fd >= 0 && !(o->f = fdopen(fd, "wb"))) {
            err_set(ERR(err, cap), "%s: %s", path, strerror(errno));
            close(fd);
            unlink(o->tmp);
        }
        if (!o->f) {
            free(o);
            return AMPX_ERR_INVALID;
        }
    }
    *out = o;
    return AMPX_OK;
}

FILE *ampx_output_stream(ampx_output *o) {
    return o ? o->f : NULL;
}

ampx_status ampx_output_commit(ampx_output *o, char *err, size_t cap) {
    if (!o) return AMPX_OK;
    int bad = ferror(o->f) || fflush(o->f) != 0, saved = errno ? errno : EIO;
    if (!bad && !o->in_place && fsync(fileno(o->f)) != 0) bad = 1, saved = errno;
    if (fclose(o->f) != 0 && !bad) bad = 1, saved = errno;
    if (!bad && !o->in_place && rename(o->tmp, o->path) != 0) bad = 1, saved = errno;
    ampx_status st = AMPX_OK;
    if (bad) {
        err_set(ERR(err, cap), "%s: write error: %s", o->path, strerror(saved));
        if (!o->in_place) unlink(o->tmp);
        st = AMPX_ERR_INVALID;
    } else if (!o->in_place) {
        st = out_sync_folder(o->path, ERR(err, cap));
    }
    free(o);
    return st;
}

void ampx_output_discard(ampx_output *o) {
    if (!o) return;
    fclose(o->f);
    if (!o->in_place) unlink(o->tmp);
    free(o);
}

// ---------------------------------------------------------------------------------------
// The same file: device and inode, or for a file not there yet its folder and name

typedef struct file_id {
    int exists;
    dev_t dev;
    ino_t ino;
    char name[PATH_MAX + NAME_MAX + 2]; /* when it does not exist: resolved folder + "/" + name */
} file_id;

static void identify(const char *path, file_id *id) {
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) == 0) {
        id->exists = 1, id->dev = st.st_dev, id->ino = st.st_ino;
        return;
    }
    char a[PATH_MAX], b[PATH_MAX], dir[PATH_MAX];
    snprintf(a, sizeof a, "%s", path);
    memcpy(b, a, sizeof b);
    if (!realpath(dirname(a), dir)) snprintf(dir, sizeof dir, "%s", a);
    snprintf(id->name, sizeof id->name, "%s/%s", dir, basename(b));
}

static int same_id(const file_id *a, const file_id *b) {
    if (a->exists != b->exists) return 0;
    if (a->exists) return a->dev == b->dev && a->ino == b->ino;
    return !strcmp(a->name, b->name);
}

int out_same_file(const char *a, const char *b) {
    if (!a || !b) return 0;
    file_id x, y;
    identify(a, &x);
    identify(b, &y);
    return same_id(&x, &y);
}

/* The input path the output clashes with: in itself, or for a pattern of shards that is not
 * a file (llm.c's "fineweb_train_*.bin") one of the files it matches, into hit; 0 if none. */
static int clashes(const char *out, const char *in, char *hit, size_t cap) {
    snprintf(hit, cap, "%s", in);
    if (out_same_file(out, in)) return 1;
    struct stat st;
    if (stat(in, &st) == 0 || !strpbrk(in, "*?[")) return 0;
    glob_t gl = {0};
    int found = 0;
    if (glob(in, 0, NULL, &gl) == 0)
        for (size_t i = 0; i < gl.gl_pathc && !found; i++)
            if ((found = out_same_file(out, gl.gl_pathv[i])))
                snprintf(hit, cap, "%s", gl.gl_pathv[i]);
    globfree(&gl);
    return found;
}

ampx_status ampx_check_outputs(const ampx_file_role *outputs, int n_outputs,
                               const ampx_file_role *inputs, int n_inputs, char *err, size_t cap) {
    char hit[PATH_MAX];
    for (int i = 0; i < n_outputs; i++) {
        const ampx_file_role *o = &outputs[i];
        if (!o->path) continue;
        for (int k = 0; k < n_inputs; k++)
            if (inputs[k].path && clashes(o->path, inputs[k].path, hit, sizeof hit)) {
                err_set(ERR(err, cap),
                        "%s (%s) is the same file as %s (%s): writing it would destroy an input; "
                        "give another path",
                        o->path, o->what, hit, inputs[k].what);
                return AMPX_ERR_INVALID;
            }
        for (int k = 0; k < i; k++)
            if (out_same_file(o->path, outputs[k].path)) {
                err_set(ERR(err, cap),
                        "%s (%s) is the same file as %s (%s): two outputs cannot share a file",
                        o->path, o->what, outputs[k].path, outputs[k].what);
                return AMPX_ERR_INVALID;
            }
    }
    return AMPX_OK;
}
