/* loader.c — finds, loads, checks and opens backend plugins.
 *
 * A plugin is libampx-NAME.so exporting ampx_backend_entry. Loading follows the ABI rules of
 * backend.h: dlopen(RTLD_NOW | RTLD_LOCAL), the entry symbol, the major version, then the
 * cheap probe, and only then create(). Every failure becomes one line that names the file
 * and the reason. The plugin's tables are copied into host-sized, zero-filled copies reading
 * only what lies within the sizes the plugin declared, so a plugin built for an older minor
 * version shows its missing slots as NULL (unsupported).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ampx/ampx.h"
#include "backend/guard.h"
#include "backend/loaded.h"
#include "base/edit_distance.h"
#include "base/error.h"

// ---------------------------------------------------------------------------------------
// Messages

static void fmt(char *buf, size_t cap, const char *f, ...) {
    if (!buf || cap == 0) return;
    buf[0] = 0;
    va_list ap;
    va_start(ap, f);
    err_vadd(ERR(buf, cap), f, ap);
    va_end(ap);
}

/* The host log callback: keep the last ERROR line so the caller can report it. */
static void backend_log(void *user, ampx_log_level level, const char *msg) {
    ampx_backend *be = user;
    if (level == AMPX_LOG_ERROR && msg) fmt(be->last_error, sizeof be->last_error, "%s", msg);
}

/* dlerror() usually starts with the file name; drop it since our line names the file. */
static const char *dl_reason(const char *path) {
    const char *e = dlerror();
    if (!e) return "unknown dlopen error";
    size_t n = strlen(path);
    if (strncmp(e, path, n) == 0 && e[n] == ':' && e[n + 1] == ' ') return e + n + 2;
    return e;
}

// ---------------------------------------------------------------------------------------
// Search path

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Appends dir to a ':'-separated list unless already present or not a directory. */
static void add_dir(char *list, size_t cap, const char *dir) {
    char real[PATH_MAX];
    if (!dir || !*dir || !realpath(dir, real) || !is_dir(real)) return;
    size_t n = strlen(real);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ':');
        size_t len      = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, real, n) == 0) return;
        p += len + (end ? 1 : 0);
    }
    size_t used = strlen(list);
    if (used + n + 2 > cap) return;
    if (used) list[used++] = ':';
    memcpy(list + used, real, n + 1);
}

static void dir_of(const char *file, char *out, size_t cap) {
    fmt(out, cap, "%s", file);
    char *slash = strrchr(out, '/');
    if (slash) *slash = '\0';
}

void ampx_plugin_search_path(char *buf, size_t cap) {
    char tmp[PATH_MAX + 64], here[PATH_MAX];
    if (!buf || cap == 0) return;
    buf[0] = '\0';
    /* 1. $AMPX_PLUGIN_PATH, in order */
    const char *env = getenv("AMPX_PLUGIN_PATH");
    if (env) {
        char *copy = strdup(env), *save = NULL;
        for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save))
            add_dir(buf, cap, d);
        free(copy);
    }
    /* 2. beside libampx itself: <libdir>/ampx (build tree and install tree alike) */
    Dl_info info;
    if (dladdr((void *)&ampx_plugin_search_path, &info) && info.dli_fname) {
        dir_of(info.dli_fname, here, sizeof here);
        fmt(tmp, sizeof tmp, "%s/ampx", here);
        add_dir(buf, cap, tmp);
    }
    /* 3. beside the running executable: <bindir>/../lib/ampx */
    ssize_t n = readlink("/proc/self/exe", here, sizeof here - 1);
    if (n > 0) {
        here[n] = '\0';
        dir_of(here, tmp, sizeof tmp);
        fmt(here, sizeof here, "%s/../lib/ampx", tmp);
        add_dir(buf, cap, here);
    }
    /* 4. the configured install directory */
    add_dir(buf, cap, AMPX_INSTALL_PLUGIN_DIR);
}

static int valid_name(const char *name) {
    if (!*name || strlen(name) > 48) return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

/* Finds libampx-NAME.so on the search path; 0 and the path in out if found. */
static int find_plugin(const char *name, char *out, size_t cap, char *searched, size_t scap) {
    ampx_plugin_search_path(searched, scap);
    char *copy = strdup(searched), *save = NULL;
    int found = -1;
    for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
        fmt(out, cap, "%s/libampx-%s.so", d, name);
        if (access(out, F_OK) == 0) {
            found = 0;
            break;
        }
    }
    free(copy);
    return found;
}

// ---------------------------------------------------------------------------------------
// Loading one file

/* Reads the ELF identification and header fields that decide whether a file can load here. */
typedef struct elf_head {
    int ok;           /* starts with the ELF magic and is long enough */
    int cls;          /* ELFCLASS32 / ELFCLASS64 */
    int data;         /* ELFDATA2LSB / ELFDATA2MSB */
    uint16_t type;    /* ET_DYN for a shared object */
    uint16_t machine; /* EM_* */
} elf_head;

static elf_head read_elf_head(const char *path) {
    elf_head h = {0};
    unsigned char b[20];
    FILE *f = fopen(path, "rb");
    if (!f) return h;
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    if (n < sizeof b || memcmp(b, ELFMAG, SELFMAG) != 0) return h;
    h.ok      = 1;
    h.cls     = b[EI_CLASS];
    h.data    = b[EI_DATA];
    int le    = h.data == ELFDATA2LSB;
    h.type    = (uint16_t)(le ? b[16] | b[17] << 8 : b[16] << 8 | b[17]);
    h.machine = (uint16_t)(le ? b[18] | b[19] << 8 : b[18] << 8 | b[19]);
    return h;
}

static const char *machine_name(uint16_t m) {
    switch (m) {
    case EM_386: return "i386";
    case EM_ARM: return "ARM";
    case EM_PPC64: return "PowerPC64";
    case EM_S390: return "s390";
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_RISCV: return "RISC-V";
    default: return "another architecture";
    }
}

/* When dlopen fails, the ELF header often says why more plainly than dlerror (glibc reports
 * a library for another architecture as "No such file or directory"). NULL: no better word. */
static const char *elf_diagnosis(const char *path, char *buf, size_t cap) {
    elf_head f = read_elf_head(path), self = read_elf_head("/proc/self/exe");
    if (!f.ok) {
        fmt(buf, cap, "not an ELF shared object");
        return buf;
    }
    if (!self.ok) return NULL;
    if (f.cls != self.cls || f.data != self.data || f.machine != self.machine) {
        fmt(buf, cap, "wrong architecture: built for %s (%d-bit), this host runs %s (%d-bit)",
            machine_name(f.machine), f.cls == ELFCLASS64 ? 64 : 32, machine_name(self.machine),
            self.cls == ELFCLASS64 ? 64 : 32);
        return buf;
    }
    if (f.type != ET_DYN) {
        fmt(buf, cap, "not a shared object (ELF type %u)", f.type);
        return buf;
    }
    return NULL;
}

/* Whether a symbol from dlsym is a function, from its ELF symbol table entry. */
static int is_function(void *sym) {
    Dl_info info;
    const ElfW(Sym) *es = NULL;
    if (!dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) || !es) return 0;
    int type = ELF64_ST_TYPE(es->st_info);
    return type == STT_FUNC || type == STT_GNU_IFUNC;
}

/* dlopen + entry + version check + table copies. Does not probe or create. */
static ampx_status load_file(const char *path, ampx_backend *be, ampx_err e) {
    struct stat st;
    if (stat(path, &st) != 0) {
        err_set(e, "%s: cannot load backend: %s", path, strerror(errno));
        return AMPX_ERR_INVALID;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(e, "%s: cannot load backend: not a regular file", path);
        return AMPX_ERR_INVALID;
    }
    dlerror();
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        char why[256];
        const char *reason = dl_reason(path);
        const char *elf    = elf_diagnosis(path, why, sizeof why);
        if (elf)
            err_set(e, "%s: cannot load backend: %s (%s)", path, elf, reason);
        else
            err_set(e, "%s: cannot load backend: %s", path, reason);
        return AMPX_ERR_INVALID;
    }
    ampx_backend_entry_fn entry;
    void *sym = dlsym(dl, AMPX_BACKEND_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    if (!sym) {
        err_set(e, "%s: not an ampx backend: no symbol '%s'", path, AMPX_BACKEND_ENTRY_SYMBOL);
        dlclose(dl);
        return AMPX_ERR_INVALID;
    }
    if (!is_function(sym)) { /* calling a data object would crash */
        err_set(e, "%s: not an ampx backend: '%s' is not a function", path,
                AMPX_BACKEND_ENTRY_SYMBOL);
        dlclose(dl);
        return AMPX_ERR_INVALID;
    }
    const ampx_backend_iface *t = entry(AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
    if (!t) {
        err_set(e, "%s: %s returned no table for host ABI %d.%d", path, AMPX_BACKEND_ENTRY_SYMBOL,
                AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
        dlclose(dl);
        return AMPX_ERR_INVALID;
    }
    if (t->size < offsetof(ampx_backend_iface, name)) {
        err_set(e, "%s: backend table too small (%u bytes)", path, t->size);
        dlclose(dl);
        return AMPX_ERR_INVALID;
    }
    if (t->abi_major != AMPX_ABI_MAJOR) {
        err_set(e, "%s: ABI major version mismatch: plugin speaks %u.%u, host speaks %d.%d", path,
                t->abi_major, t->abi_minor, AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
        dlclose(dl);
        return AMPX_ERR_INVALID;
    }
    memset(&be->iface, 0, sizeof be->iface);
    memcpy(&be->iface, t, t->size < sizeof be->iface ? t->size : sizeof be->iface);
    memset(&be->ops, 0, sizeof be->ops);
    if (be->iface.ops) {
        uint32_t n = be->iface.ops->size;
        memcpy(&be->ops, be->iface.ops, n < sizeof be->ops ? n : sizeof be->ops);
    }
    be->iface.ops = &be->ops;
    if (!be->iface.probe) {
        err_set(e, "%s: backend table has no probe function", path);
        dlclose(dl);
        return AMPX_ERR_INVALID;
    }
    if (!be->iface.name) be->iface.name = "?";
    be->dl = dl;
    fmt(be->path, sizeof be->path, "%s", path);
    return AMPX_OK;
}

/* The slots every v1 backend must fill; checked once the probe says the device is usable
 * (a plugin on a machine without its device may hand out little more than a probe). */
static const char *missing_slot(const ampx_backend_iface *t) {
    if (!t->create) return "create";
    if (!t->destroy) return "destroy";
    if (!t->device_info) return "device_info";
    if (!t->supports) return "supports";
    if (!t->buffer_alloc) return "buffer_alloc";
    if (!t->buffer_free) return "buffer_free";
    if (!t->buffer_write) return "buffer_write";
    if (!t->buffer_read) return "buffer_read";
    if (!t->buffer_copy) return "buffer_copy";
    if (!t->buffer_fill) return "buffer_fill";
    if (!t->synchronize) return "synchronize";
    return NULL;
}

/* The cheap probe, then the table's required slots. */
static ampx_status probe(ampx_backend *be, ampx_err e) {
    char reason[512]          = "";
    ampx_status st            = be->iface.probe(reason, sizeof reason);
    reason[sizeof reason - 1] = '\0';
    if (st != AMPX_OK) {
        err_set(e, "%s: backend '%s' unavailable: %s", be->path, be->iface.name,
                reason[0] ? reason : ampx_status_name(st));
        return AMPX_ERR_UNAVAILABLE;
    }
    const char *missing = missing_slot(&be->iface);
    if (missing) {
        err_set(e, "%s: backend '%s' is incomplete: no %s function", be->path, be->iface.name,
                missing);
        return AMPX_ERR_INVALID;
    }
    return AMPX_OK;
}

// ---------------------------------------------------------------------------------------
// Guarded slots: once a context is created, the host's table calls the plugin through
// these, each marked in flight (backend/guard.h), so a plugin that crashes, aborts or exits
// in a buffer call, device_info, supports, synchronize or destroy is named with the call.
// A context leads to its backend through the list of open ones.

enum { MAX_OPEN = 64 };
static ampx_backend *open_list[MAX_OPEN];
static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;

static int open_add(ampx_backend *be) {
    int ok = 0;
    pthread_mutex_lock(&open_mu);
    for (int i = 0; i < MAX_OPEN && !ok; i++)
        if (!open_list[i]) open_list[i] = be, ok = 1;
    pthread_mutex_unlock(&open_mu);
    return ok;
}

static void open_remove(const ampx_backend *be) {
    pthread_mutex_lock(&open_mu);
    for (int i = 0; i < MAX_OPEN; i++)
        if (open_list[i] == be) open_list[i] = NULL;
    pthread_mutex_unlock(&open_mu);
}

static ampx_backend *owner(const ampx_context *ctx) {
    ampx_backend *be = NULL;
    pthread_mutex_lock(&open_mu);
    for (int i = 0; i < MAX_OPEN && !be; i++)
        if (open_list[i] && open_list[i]->ctx == ctx) be = open_list[i];
    pthread_mutex_unlock(&open_mu);
    return be;
}

/* The body of a guarded slot: the owner, the call marked, the plugin's slot. */
#define GUARDED(slot, fail, ...)                                                                   \
    ampx_backend *be = owner(ctx);                                                                 \
    if (!be) return fail;                                                                          \
    guard_call saved;                                                                              \
    guard_enter(&saved, be->iface.name, be->path, #slot, NULL);                                    \
    __typeof__(be->real.slot(ctx, __VA_ARGS__)) r = be->real.slot(ctx, __VA_ARGS__);               \
    guard_leave(&saved);                                                                           \
    return r;

static ampx_status g_device_info(ampx_context *ctx, ampx_device_info *info) {
    GUARDED(device_info, AMPX_ERR_INVALID, info)
}
static int g_supports(ampx_context *ctx, uint32_t op, const ampx_dtype *dt, uint32_t n,
                      uint32_t shape_class) {
    GUARDED(supports, 0, op, dt, n, shape_class)
}
static ampx_status g_buffer_alloc(ampx_context *ctx, uint64_t bytes, ampx_buffer **out) {
    GUARDED(buffer_alloc, AMPX_ERR_INVALID, bytes, out)
}
static ampx_status g_buffer_write(ampx_context *ctx, ampx_buffer *dst, uint64_t offset,
                                  const void *src, uint64_t bytes) {
    GUARDED(buffer_write, AMPX_ERR_INVALID, dst, offset, src, bytes)
}
static ampx_status g_buffer_read(ampx_context *ctx, const ampx_buffer *src, uint64_t offset,
                                 void *dst, uint64_t bytes) {
    GUARDED(buffer_read, AMPX_ERR_INVALID, src, offset, dst, bytes)
}
static ampx_status g_buffer_copy(ampx_context *ctx, ampx_buffer *dst, uint64_t dst_offset,
                                 const ampx_buffer *src, uint64_t src_offset, uint64_t bytes) {
    GUARDED(buffer_copy, AMPX_ERR_INVALID, dst, dst_offset, src, src_offset, bytes)
}
static ampx_status g_buffer_fill(ampx_context *ctx, ampx_buffer *dst, uint64_t offset,
                                 uint64_t bytes, uint32_t pattern, uint32_t pattern_bytes) {
    GUARDED(buffer_fill, AMPX_ERR_INVALID, dst, offset, bytes, pattern, pattern_bytes)
}
#undef GUARDED

/* The slots without a result, and synchronize (no arguments past the context). */
static void g_buffer_free(ampx_context *ctx, ampx_buffer *buf) {
    ampx_backend *be = owner(ctx);
    if (!be) return;
    guard_call saved;
    guard_enter(&saved, be->iface.name, be->path, "buffer_free", NULL);
    be->real.buffer_free(ctx, buf);
    guard_leave(&saved);
}
static ampx_status g_synchronize(ampx_context *ctx) {
    ampx_backend *be = owner(ctx);
    if (!be) return AMPX_ERR_INVALID;
    guard_call saved;
    guard_enter(&saved, be->iface.name, be->path, "synchronize", NULL);
    ampx_status st = be->real.synchronize(ctx);
    guard_leave(&saved);
    return st;
}

/* From here on the host's table calls the plugin through the guarded slots. */
static void guard_slots(ampx_backend *be) {
    be->real = be->iface;
    if (!open_add(be)) return; /* more than MAX_OPEN at once: unguarded, still working */
    be->iface.device_info  = g_device_info;
    be->iface.supports     = g_supports;
    be->iface.buffer_alloc = g_buffer_alloc;
    be->iface.buffer_free  = g_buffer_free;
    be->iface.buffer_write = g_buffer_write;
    be->iface.buffer_read  = g_buffer_read;
    be->iface.buffer_copy  = g_buffer_copy;
    be->iface.buffer_fill  = g_buffer_fill;
    be->iface.synchronize  = g_synchronize;
}

// ---------------------------------------------------------------------------------------
// create() with a deadline: it runs on a thread of its own while the caller waits up to
// $AMPX_CREATE_TIMEOUT_S seconds (120 by default, 0: no limit, create runs on the caller's
// thread). A create that does not return in time is abandoned: the open fails with a line
// naming the plugin, and what it may still touch (its host struct, options, the backend) is
// kept, reachable, for the rest of the process, which is expected to exit.

typedef struct creating {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    ampx_status st;
    ampx_context *ctx;
    ampx_host host;
    ampx_backend *be;
    char **opts;
    uint32_t n_opts;
} creating;

static creating *abandoned[8]; /* what an abandoned create may still touch */

static void *create_thread(void *arg) {
    creating *c       = arg;
    ampx_context *ctx = NULL;
    ampx_status st    = c->be->real.create(&c->host, &ctx);
    pthread_mutex_lock(&c->mu);
    c->st = st, c->ctx = ctx, c->done = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static int create_timeout_s(void) {
    const char *env = getenv("AMPX_CREATE_TIMEOUT_S");
    char *end;
    long v = env && *env ? strtol(env, &end, 10) : 120;
    return env && *env && (*end || v < 0 || v > 86400) ? 120 : (int)v;
}

/* create() guarded and under the deadline; 1 when it was abandoned (c is then kept). */
static int create_in_time(creating *c, int timeout_s) {
    guard_call saved;
    guard_enter(&saved, c->be->iface.name, c->be->path, "create", NULL);
    if (timeout_s == 0) {
        c->st = c->be->real.create(&c->host, &c->ctx);
        guard_leave(&saved);
        return 0;
    }
    pthread_t th;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&th, NULL, create_thread, c) != 0) {
        c->st = c->be->real.create(&c->host, &c->ctx);
        guard_leave(&saved);
        return 0;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_s;
    pthread_mutex_lock(&c->mu);
    while (!c->done)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT) break;
    int late = !c->done;
    pthread_mutex_unlock(&c->mu);
    guard_leave(&saved);
    if (late) {
        pthread_detach(th);
        for (int i = 0; i < 8; i++)
            if (!abandoned[i]) {
                abandoned[i] = c;
                break;
            }
        return 1;
    }
    pthread_join(th, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    return 0;
}

// ---------------------------------------------------------------------------------------
// Public API

/* The installed backend whose name is closest to a misspelt one (a third of its letters
 * at most, as the command's did-you-mean) into best; 0 when there is none. */
static int nearest_plugin(const char *spec, char *best, size_t cap) {
    enum { MAX_LISTED = 32 };
    ampx_plugin_info *found = malloc(MAX_LISTED * sizeof *found);
    size_t n = found ? ampx_plugin_list(found, MAX_LISTED) : 0, bd = 99, ls = strlen(spec);
    for (size_t i = 0; i < n && i < MAX_LISTED; i++) {
        size_t d = edit_distance(spec, found[i].name);
        if (d < bd) bd = d, fmt(best, cap, "%s", found[i].name);
    }
    free(found);
    return bd <= (ls < 6 ? 2 : ls / 3);
}

ampx_status loader_open_one(const char *spec, const char *const *options, uint32_t n_options,
                            ampx_backend **out, ampx_err e) {
    char path[PATH_MAX], searched[4096];
    ampx_backend *be = NULL;
    ampx_status st;
    char **opts     = NULL;
    uint32_t n_opts = 0;

    *out = NULL;
    if (!spec || !*spec) {
        err_set(e, "no backend given");
        return AMPX_ERR_INVALID;
    }
    if (strchr(spec, '/')) {
        fmt(path, sizeof path, "%s", spec);
    } else if (!valid_name(spec)) {
        err_set(e,
                "backend '%s': not a backend name (letters, digits, '-', '_') "
                "nor a path to a plugin (a path contains '/')",
                spec);
        return AMPX_ERR_INVALID;
    } else if (find_plugin(spec, path, sizeof path, searched, sizeof searched) != 0) {
        char near[64];
        if (nearest_plugin(spec, near, sizeof near)) {
            err_set(e, "backend '%s' not found (did you mean '%s'?)", spec, near);
            return AMPX_ERR_INVALID;
        }
        err_set(e,
                "libampx-%s.so: backend '%s' not found in %s (set AMPX_PLUGIN_PATH, "
                "or give a path like ./libampx-%s.so)",
                spec, spec, searched[0] ? searched : "(no search directories)", spec);
        return AMPX_ERR_INVALID;
    }

    be = calloc(1, sizeof *be);
    if (!be) {
        err_set(e, "%s: out of host memory", path);
        return AMPX_ERR_NO_MEMORY;
    }
    if ((st = load_file(path, be, e)) != AMPX_OK) goto fail;
    if ((st = probe(be, e)) != AMPX_OK) goto fail;

    opts        = loader_merge_options(be->iface.name, options, n_options, &n_opts);
    creating *c = calloc(1, sizeof *c);
    if (!opts || !c) {
        free(c);
        st = AMPX_ERR_NO_MEMORY;
        err_set(e, "%s: out of host memory", path);
        goto fail;
    }
    if (loader_hide_ops(be, opts, &n_opts, e)) {
        free(c);
        st = AMPX_ERR_INVALID;
        goto fail;
    }
    c->be     = be;
    c->opts   = opts;
    c->n_opts = n_opts;
    c->host   = (ampx_host){
          .size      = sizeof c->host,
          .abi_major = AMPX_ABI_MAJOR,
          .abi_minor = AMPX_ABI_MINOR,
          .log       = backend_log,
          .log_user  = be,
          .options   = (const char *const *)opts,
          .n_options = n_opts,
    };
    be->real = be->iface;
    guard_install();
    int timeout_s = create_timeout_s();
    if (create_in_time(c, timeout_s)) {
        err_set(e,
                "%s: backend '%s' failed to start: create() did not return within %d s "
                "(AMPX_CREATE_TIMEOUT_S)",
                path, be->iface.name, timeout_s);
        return AMPX_ERR_UNAVAILABLE; /* be, c and opts stay with the abandoned create */
    }
    st      = c->st;
    be->ctx = c->ctx;
    free(c);
    loader_free_options(opts, n_opts);
    opts = NULL;
    if (st != AMPX_OK || !be->ctx) {
        err_set(e, "%s: backend '%s' failed to start: %s", path, be->iface.name,
                be->last_error[0] ? be->last_error : ampx_status_name(st));
        be->ctx = NULL;
        if (st == AMPX_OK) st = AMPX_ERR_INTERNAL;
        goto fail;
    }
    guard_slots(be);
    *out = be;
    return AMPX_OK;
fail:
    loader_free_options(opts, n_opts);
    if (be->dl) dlclose(be->dl);
    free(be);
    return st;
}

void ampx_backend_close(ampx_backend *be) {
    if (!be) return;
    if (be->members) { /* a list: its members own the contexts */
        for (int i = be->n_members - 1; i >= 0; i--)
            ampx_backend_close(be->members[i]);
        free(be->members);
        free(be);
        return;
    }
    if (be->ctx) {
        be->iface.synchronize(be->ctx);
        guard_call saved;
        guard_enter(&saved, be->iface.name, be->path, "destroy", NULL);
        be->real.destroy(be->ctx); /* joins the plugin's threads before we unload it */
        guard_leave(&saved);
        open_remove(be);
    }
    if (be->dl) dlclose(be->dl);
    free(be);
}

const ampx_backend_iface *ampx_backend_iface_of(const ampx_backend *be) {
    return &be->iface;
}
ampx_context *ampx_backend_context(const ampx_backend *be) {
    return be->ctx;
}
const char *ampx_backend_path(const ampx_backend *be) {
    return be->path;
}
const char *ampx_backend_last_error(const ampx_backend *be) {
    return be->last_error;
}

ampx_status ampx_backend_device_info(const ampx_backend *be, ampx_device_info *info) {
    ampx_device_info d = {.size = sizeof d};
    ampx_status st     = be->iface.device_info && be->ctx ? be->iface.device_info(be->ctx, &d)
                                                          : AMPX_ERR_UNSUPPORTED;
    /* the plugin's strings are bounded by their fields, whatever it wrote */
    d.name[sizeof d.name - 1]               = 0;
    d.description[sizeof d.description - 1] = 0;
    if (st != AMPX_OK) {
        memset(&d, 0, sizeof d);
        snprintf(d.name, sizeof d.name, "(no device info)");
    }
    d.size = info->size < sizeof d ? info->size : (uint32_t)sizeof d;
    memcpy(info, &d, d.size);
    return st;
}

void *ampx_backend_op_slot(const ampx_backend *be, uint32_t op) {
    if (op >= AMPX_OP_COUNT) return NULL;
    for (int i = 0; be->members && i < be->n_members; i++) /* a list: any member's */
        if (ampx_backend_op_slot(be->members[i], op))
            return ampx_backend_op_slot(be->members[i], op);
    if (be->members) return NULL;
    void (*const *slots)(void) = (void (*const *)(void))((const char *)&be->ops + 8);
    void *p;
    memcpy(&p, &slots[op], sizeof p);
    return p;
}

int ampx_backend_supports(const ampx_backend *be, uint32_t op, const ampx_dtype *dtypes,
                          uint32_t n_dtypes) {
    for (int i = 0; be->members && i < be->n_members; i++)
        if (ampx_backend_supports(be->members[i], op, dtypes, n_dtypes)) return 1;
    if (be->members) return 0;
    if (!ampx_backend_op_slot(be, op)) return 0;
    return be->iface.supports(be->ctx, op, dtypes, n_dtypes, AMPX_SHAPE_ANY) != 0;
}

int ampx_backend_gemm_epilogue(const ampx_backend *be, const ampx_dtype *dtypes) {
    if (be->iface.abi_minor < 5 || !ampx_backend_op_slot(be, AMPX_OP_GEMM)) return 0;
    return be->iface.supports(be->ctx, AMPX_OP_GEMM, dtypes, 3, AMPX_SHAPE_GEMM_EPILOGUE) != 0;
}

uint64_t ampx_backend_op_mask(const ampx_backend *be) {
    static const ampx_dtype f32[8] = {AMPX_F32, AMPX_F32, AMPX_F32, AMPX_F32,
                                      AMPX_F32, AMPX_F32, AMPX_F32, AMPX_F32};
    uint64_t mask                  = 0;
    /* the fp8 ops (ABI 1.7) in their usual form: e4m3 operands, an f32 side */
    static const ampx_dtype q8[2] = {AMPX_F32, AMPX_E4M3}, g8[3] = {AMPX_E4M3, AMPX_E4M3, AMPX_F32};
    for (uint32_t op = 0; op < AMPX_OP_COUNT && op < 64; op++) {
        const ampx_dtype *dt = op == AMPX_OP_FP8_QUANTIZE ? q8 : op == AMPX_OP_GEMM_FP8 ? g8 : f32;
        if (ampx_backend_supports(be, op, dt, ampx_op_n_dtypes(op))) mask |= (uint64_t)1 << op;
    }
    return mask;
}

// ---------------------------------------------------------------------------------------
// Discovery: each plugin is loaded and probed in a child process with a time limit
// ($AMPX_PROBE_TIMEOUT_S, 10 s by default), so a plugin whose constructor or probe hangs or
// crashes is listed with the reason instead of taking the listing down with it.

static void probe_here(ampx_plugin_info *pi) {
    ampx_backend be = {0};
    if (load_file(pi->path, &be, ERR(pi->reason, sizeof pi->reason)) != AMPX_OK) return;
    ampx_status st = probe(&be, ERR(pi->reason, sizeof pi->reason));
    pi->loadable   = st != AMPX_ERR_INVALID;
    pi->available  = st == AMPX_OK;
    pi->abi_major  = be.iface.abi_major;
    pi->abi_minor  = be.iface.abi_minor;
    dlclose(be.dl);
}

static void probe_in_child(ampx_plugin_info *pi) {
    const char *env = getenv("AMPX_PROBE_TIMEOUT_S");
    int timeout_s   = env && atoi(env) > 0 ? atoi(env) : 10;
    int fds[2];
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = pipe(fds) == 0 ? fork() : -1;
    if (pid < 0) { /* no child: probe here, without the time limit */
        probe_here(pi);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        probe_here(pi);
        const char *p = (const char *)pi;
        for (size_t n = 0, left = sizeof *pi; left;) {
            ssize_t w = write(fds[1], p + n, left);
            if (w <= 0) break;
            n += (size_t)w, left -= (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    ampx_plugin_info got;
    size_t n = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int timed_out = 0;
    while (n < sizeof got) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left_ms = timeout_s * 1000L -
                       ((now.tv_sec - t0.tv_sec) * 1000L + (now.tv_nsec - t0.tv_nsec) / 1000000L);
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int r             = left_ms > 0 ? poll(&pfd, 1, (int)left_ms) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            timed_out = 1;
            break;
        }
        ssize_t k = r > 0 ? read(fds[0], (char *)&got + n, sizeof got - n) : -1;
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (n == sizeof got) {
        got.name[sizeof got.name - 1]     = 0;
        got.path[sizeof got.path - 1]     = 0;
        got.reason[sizeof got.reason - 1] = 0;
        *pi                               = got;
    } else if (timed_out) {
        fmt(pi->reason, sizeof pi->reason,
            "%s: loading and probing did not finish within %d s (AMPX_PROBE_TIMEOUT_S)", pi->path,
            timeout_s);
    } else if (WIFSIGNALED(status)) {
        fmt(pi->reason, sizeof pi->reason, "%s: crashed while loading or probing (signal %d, %s)",
            pi->path, WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else {
        fmt(pi->reason, sizeof pi->reason, "%s: exited while loading or probing (status %d)",
            pi->path, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const ampx_plugin_info *)a)->name, ((const ampx_plugin_info *)b)->name);
}

size_t ampx_plugin_list(ampx_plugin_info *out, size_t cap) {
    char search[4096];
    size_t count = 0;
    ampx_plugin_search_path(search, sizeof search);
    char *copy = strdup(search), *save = NULL;
    for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
        DIR *dir = opendir(d);
        if (!dir) continue;
        struct dirent *ent;
        while ((ent = readdir(dir))) {
            const char *f = ent->d_name;
            size_t n      = strlen(f);
            if (n <= 11 || strncmp(f, "libampx-", 8) != 0 || strcmp(f + n - 3, ".so") != 0)
                continue;
            char name[64];
            fmt(name, sizeof name, "%.*s", (int)(n - 11), f + 8);
            int dup = 0;
            for (size_t i = 0; i < count && i < cap; i++)
                dup |= strcmp(out[i].name, name) == 0;
            if (dup) continue;
            if (count < cap) {
                ampx_plugin_info *pi = &out[count];
                memset(pi, 0, sizeof *pi);
                fmt(pi->name, sizeof pi->name, "%s", name);
                fmt(pi->path, sizeof pi->path, "%s/%s", d, f);
                if (!valid_name(name))
                    fmt(pi->reason, sizeof pi->reason,
                        "%s: not a backend name (letters a-z, digits, '-', '_')", pi->path);
                else
                    probe_in_child(pi);
            }
            count++;
        }
        closedir(dir);
    }
    free(copy);
    qsort(out, count < cap ? count : cap, sizeof *out, by_name);
    return count;
}
