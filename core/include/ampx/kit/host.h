/* ampx/kit/host.h — part of plugin_kit.h (a plugin includes that): the checks of the entry
 * points other than ops: the buffer calls (ranges, host pointers, fill patterns), create()
 * (the host struct by its size, the ABI major, "key=value" options) and device_info() (the
 * host's struct written only within its size).
 */
#ifndef AMPX_KIT_HOST_H
#define AMPX_KIT_HOST_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------
// Buffers

static inline ampx_status ampx_kit_check_alloc(const ampx_kit *kit, ampx_buffer **out) {
    if (!kit) return AMPX_ERR_INVALID;
    if (!out) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "buffer_alloc: out is NULL");
    *out = NULL;
    return AMPX_OK;
}

/* [offset, offset + bytes) inside buf, without overflow. */
static inline ampx_status ampx_kit_check_range(const ampx_kit *kit, const char *opname,
                                               const char *what, const ampx_buffer *buf,
                                               uint64_t offset, uint64_t bytes) {
    uint64_t end;
    if (!buf) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s buffer is NULL", opname, what);
    uint64_t have = kit->buffer_bytes(buf);
    if (__builtin_add_overflow(offset, bytes, &end) || end > have)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: %s range [%llu, +%llu) overruns its buffer of %llu bytes", opname,
                             what, (unsigned long long)offset, (unsigned long long)bytes,
                             (unsigned long long)have);
    return AMPX_OK;
}

/* buffer_write and buffer_read: the device range, then the host pointer (NULL is fine for
 * 0 bytes). `read` selects the names: src is the buffer for a read, dst for a write. */
static inline ampx_status ampx_kit_check_transfer(const ampx_kit *kit, int read,
                                                  const ampx_buffer *buf, uint64_t offset,
                                                  const void *host, uint64_t bytes) {
    const char *op = read ? "buffer_read" : "buffer_write";
    if (!kit) return AMPX_ERR_INVALID;
    AMPX_KIT_TRY(ampx_kit_check_range(kit, op, read ? "src" : "dst", buf, offset, bytes));
    if (bytes > 0 && !host)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %s is NULL", op, read ? "dst" : "src");
    return AMPX_OK;
}

static inline ampx_status ampx_kit_check_copy(const ampx_kit *kit, const ampx_buffer *dst,
                                              uint64_t dst_offset, const ampx_buffer *src,
                                              uint64_t src_offset, uint64_t bytes) {
    if (!kit) return AMPX_ERR_INVALID;
    AMPX_KIT_TRY(ampx_kit_check_range(kit, "buffer_copy", "dst", dst, dst_offset, bytes));
    return ampx_kit_check_range(kit, "buffer_copy", "src", src, src_offset, bytes);
}

static inline ampx_status ampx_kit_check_fill(const ampx_kit *kit, const ampx_buffer *dst,
                                              uint64_t offset, uint64_t bytes,
                                              uint32_t pattern_bytes) {
    if (!kit) return AMPX_ERR_INVALID;
    if (pattern_bytes != 1 && pattern_bytes != 2 && pattern_bytes != 4)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "buffer_fill: pattern_bytes %u is not 1, 2 or 4", pattern_bytes);
    if (bytes % pattern_bytes != 0)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "buffer_fill: %llu bytes is not a multiple of pattern_bytes %u",
                             (unsigned long long)bytes, pattern_bytes);
    return ampx_kit_check_range(kit, "buffer_fill", "dst", dst, offset, bytes);
}

/* Fills bytes of host memory with the low pattern_bytes bytes of pattern, in the machine's
 * (little-endian) byte order, as an element of that width would be stored. */
static inline void ampx_kit_fill_host(unsigned char *p, uint64_t bytes, uint32_t pattern,
                                      uint32_t pattern_bytes) {
    unsigned char pat[4];
    uint16_t v16 = (uint16_t)pattern;
    if (pattern_bytes == 2)
        memcpy(pat, &v16, 2);
    else
        memcpy(pat, &pattern, 4);
    /* one byte repeated (zeros above all: every buffer a trainer allocates): memset */
    int same = 1;
    for (uint32_t i = 1; i < pattern_bytes && same; i++)
        same = pat[i] == pat[0];
    if (pattern_bytes == 1 || same) {
        memset(p, (int)pat[0], (size_t)bytes);
        return;
    }
    /* one element, then the filled prefix copied after itself (doubling): a few large
     * copies, not one call per element */
    uint64_t done = bytes < pattern_bytes ? bytes : pattern_bytes;
    memcpy(p, pat, (size_t)done);
    while (done < bytes) {
        uint64_t n = done < bytes - done ? done : bytes - done;
        memcpy(p + done, p, (size_t)n);
        done += n;
    }
}

// ---------------------------------------------------------------------------------------
// create(): the host struct, the ABI, options

/* The start of every create(): *out cleared, the host struct read by its size into *h, the
 * kit set up from it, out checked and the ABI major compared ("<name>: host speaks ABI 2.0,
 * this plugin ABI 1.1"). A NULL host fails silently (nowhere to log). */
static inline ampx_status ampx_kit_begin_create(const ampx_host *host, void *out, const char *name,
                                                ampx_kit_buffer_bytes_fn buffer_bytes, ampx_host *h,
                                                ampx_kit *kit) {
    if (out) *(void **)out = NULL;
    memset(h, 0, sizeof *h);
    memset(kit, 0, sizeof *kit);
    kit->name         = name;
    kit->buffer_bytes = buffer_bytes;
    if (!host) return AMPX_ERR_INVALID;
    uint32_t size = host->size;
    memcpy(h, host, size < sizeof *h ? size : sizeof *h);
    kit->log      = h->log;
    kit->log_user = h->log_user;
    if (!out) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: create: out is NULL", name);
    if (h->abi_major != AMPX_ABI_MAJOR)
        return ampx_kit_fail(kit, AMPX_ERR_UNSUPPORTED,
                             "%s: host speaks ABI %u.%u, this plugin ABI %d.%d", name, h->abi_major,
                             h->abi_minor, AMPX_ABI_MAJOR, AMPX_ABI_MINOR);
    return AMPX_OK;
}

/* One "key=value" option, split. */
typedef struct ampx_kit_option {
    const char *key; /* not NUL-terminated at the '=': use key_len */
    size_t key_len;
    const char *value;
} ampx_kit_option;

/* Option i of the host, split at its first '='. Errors: "<name>: 2 options but a NULL
 * options array", "<name>: option 0 is NULL", "<name>: option 'x' is not key=value". */
static inline ampx_status ampx_kit_option_at(const ampx_kit *kit, const ampx_host *h, uint32_t i,
                                             ampx_kit_option *o) {
    if (!h->options)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %u options but a NULL options array",
                             kit->name, h->n_options);
    const char *opt = h->options[i];
    if (!opt) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: option %u is NULL", kit->name, i);
    const char *eq = strchr(opt, '=');
    if (!eq)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: option '%s' is not key=value", kit->name,
                             opt);
    o->key     = opt;
    o->key_len = (size_t)(eq - opt);
    o->value   = eq + 1;
    return AMPX_OK;
}

static inline int ampx_kit_option_is(const ampx_kit_option *o, const char *key) {
    return o->key_len == strlen(key) && strncmp(o->key, key, o->key_len) == 0;
}

/* The value as a decimal integer in [lo, hi]: "<name>: threads=x: expected an integer in
 * [1, 1024]". */
static inline ampx_status ampx_kit_option_uint(const ampx_kit *kit, const ampx_kit_option *o,
                                               unsigned long lo, unsigned long hi,
                                               unsigned long *out) {
    char *end       = NULL;
    unsigned long v = 0;
    if (o->value[0] >= '0' && o->value[0] <= '9') v = strtoul(o->value, &end, 10);
    if (!end || *end != '\0' || v < lo || v > hi)
        return ampx_kit_fail(kit, AMPX_ERR_INVALID,
                             "%s: %.*s=%s: expected an integer in [%lu, %lu]", kit->name,
                             (int)o->key_len, o->key, o->value, lo, hi);
    *out = v;
    return AMPX_OK;
}

/* The value as one of a NULL-terminated list of names: *index; "<name>: gemm=x: expected
 * one of auto, cublas, native". */
static inline ampx_status ampx_kit_option_choice(const ampx_kit *kit, const ampx_kit_option *o,
                                                 const char *const *names, int *index) {
    char list[256] = "";
    for (int i = 0; names[i]; i++) {
        if (strcmp(o->value, names[i]) == 0) {
            *index = i;
            return AMPX_OK;
        }
        if (strlen(list) + strlen(names[i]) + 3 < sizeof list) {
            strcat(list, i ? ", " : "");
            strcat(list, names[i]);
        }
    }
    return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: %.*s=%s: expected one of %s", kit->name,
                         (int)o->key_len, o->key, o->value, list);
}

/* An option no branch took: "<name>: unknown option 'x' (known: threads, isa)". */
static inline ampx_status ampx_kit_option_unknown(const ampx_kit *kit, const ampx_kit_option *o,
                                                  const char *known) {
    return ampx_kit_fail(kit, AMPX_ERR_INVALID, "%s: unknown option '%.*s' (known: %s)", kit->name,
                         (int)o->key_len, o->key, known);
}

// ---------------------------------------------------------------------------------------
// device_info()

/* The checks of device_info(): a context, info not NULL, info->size holding its own field.
 * d is zeroed for the plugin to fill. */
static inline ampx_status
ampx_kit_begin_device_info(const ampx_kit *kit, const ampx_device_info *info, ampx_device_info *d) {
    if (!kit) return AMPX_ERR_INVALID;
    if (!info) return ampx_kit_fail(kit, AMPX_ERR_INVALID, "device_info: info is NULL");
    if (info->size < sizeof(uint32_t))
        return ampx_kit_fail(kit, AMPX_ERR_INVALID, "device_info: info size %u too small",
                             info->size);
    memset(d, 0, sizeof *d);
    return AMPX_OK;
}

/* Writes d into the host's info, only what lies within info->size, keeping that size. */
static inline ampx_status ampx_kit_end_device_info(ampx_device_info *info,
                                                   const ampx_device_info *d) {
    size_t n = info->size < sizeof *d ? info->size : sizeof *d;
    memcpy((char *)info + sizeof(uint32_t), (const char *)d + sizeof(uint32_t),
           n - sizeof(uint32_t));
    return AMPX_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* AMPX_KIT_HOST_H */
