/* gemm_params.c — the tuned GEMM's parameters: their bounds, and the parameter file of the
 * cache folder (gemm_tune.c reads and writes it).
 *
 * The file is untrusted input (any process may have written or truncated it): it is parsed
 * line by line with fixed keys in a fixed order, every number is decimal digits only and
 * bounded, and the result must pass ocl_gemm_params_check for this device. Anything else is
 * rejected with a reason, and the caller falls back to defaults or tunes again:
 *
 *   ampx-opencl-gemm-params 2
 *   key 0123456789abcdef
 *   params MWG=64 NWG=64 KWG=16 MDIMC=16 NDIMC=16 VWN=4
 *   block MR=6 NR=32
 *   gflops 123.4
 * (block MR=0 NR=0: the packed kernel's block was not tuned; the device's default applies).
 */
#include "gemm_params.h"

#include <stdio.h>
#include <string.h>

#define MAX_TILE 256 /* MWG, NWG, KWG */
#define MAX_DIM 64   /* MDIMC, NDIMC */
#define MAX_ACC 256  /* floats of accumulators per work item */

/* why = msg with %u replaced by v (msg is one of this file's literals). */
static int fail(char *why, size_t cap, const char *msg, unsigned v) {
    if (why && cap) {
        const char *pc = strstr(msg, "%u");
        if (pc)
            snprintf(why, cap, "%.*s%u%s", (int)(pc - msg), msg, v, pc + 2);
        else
            snprintf(why, cap, "%s", msg);
    }
    return -1;
}

int ocl_gemm_block_check(uint32_t mr, uint32_t nr) {
    return mr >= 1 && mr <= 16 && nr >= 16 && nr <= 64 && nr % 16 == 0 && mr * nr / 16 <= 32 ? 0
                                                                                             : -1;
}

int ocl_gemm_params_check(const ocl_gemm_params *p, const ocl_gemm_limits *l, char *why,
                          size_t cap) {
    if ((p->mr || p->nr) && ocl_gemm_block_check(p->mr, p->nr))
        return fail(why, cap,
                    "block MR=%u and its NR: not one the packed kernel builds (MR 1-16, NR 16, "
                    "32, 48 or 64, MR * NR / 16 at most 32)",
                    p->mr);
    const uint32_t tiles[3] = {p->mwg, p->nwg, p->kwg};
    for (int i = 0; i < 3; i++)
        if (tiles[i] < 1 || tiles[i] > MAX_TILE)
            return fail(why, cap, "a tile size of %u (1 to 256)", tiles[i]);
    if (p->mdimc < 1 || p->mdimc > MAX_DIM || p->ndimc < 1 || p->ndimc > MAX_DIM)
        return fail(why, cap, "a work-group side of %u (1 to 64)",
                    p->mdimc < 1 || p->mdimc > MAX_DIM ? p->mdimc : p->ndimc);
    if (p->vwn != 1 && p->vwn != 2 && p->vwn != 4 && p->vwn != 8 && p->vwn != 16)
        return fail(why, cap, "VWN=%u (1, 2, 4, 8 or 16)", p->vwn);
    if (p->mwg % p->mdimc) return fail(why, cap, "MWG=%u not a multiple of MDIMC", p->mwg);
    if (p->nwg % (p->ndimc * p->vwn))
        return fail(why, cap, "NWG=%u not a multiple of NDIMC * VWN", p->nwg);
    if ((uint64_t)p->mdimc * p->ndimc > l->max_wg)
        return fail(why, cap, "a work-group of %u items, more than the device allows",
                    p->mdimc * p->ndimc);
    uint64_t local = (uint64_t)p->kwg * (p->mwg + p->nwg) * 4;
    if (local > l->local_mem)
        return fail(why, cap, "%u bytes of local memory, more than the device has",
                    (unsigned)local);
    if ((uint64_t)(p->mwg / p->mdimc) * (p->nwg / p->ndimc) > MAX_ACC)
        return fail(why, cap, "%u accumulators per work item (at most 256)",
                    (p->mwg / p->mdimc) * (p->nwg / p->ndimc));
    return 0;
}

// ---------------------------------------------------------------------------------------
// Reading: a cursor over the text that never runs past len.

typedef struct cursor {
    const char *s;
    size_t len, at;
} cursor;

/* Consumes the literal word w; 0 on success. */
static int take(cursor *c, const char *w) {
    size_t n = strlen(w);
    if (c->len - c->at < n || memcmp(c->s + c->at, w, n) != 0) return -1;
    c->at += n;
    return 0;
}

/* Decimal digits (1 to 6 of them) into *v. */
static int take_uint(cursor *c, uint32_t *v) {
    uint32_t x = 0;
    size_t n   = 0;
    while (c->at < c->len && c->s[c->at] >= '0' && c->s[c->at] <= '9' && n < 7) {
        x = x * 10 + (uint32_t)(c->s[c->at++] - '0');
        n++;
    }
    if (n == 0 || n > 6) return -1;
    *v = x;
    return 0;
}

/* Exactly 16 lower-case hex digits. */
static int take_hex64(cursor *c, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 16; i++) {
        if (c->at >= c->len) return -1;
        char ch = c->s[c->at++];
        int d   = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) return -1;
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return 0;
}

/* The rate: digits, optionally '.', digits (at most 9 before, 3 after). */
static int take_rate(cursor *c, double *v) {
    uint32_t whole = 0, frac = 0;
    if (take_uint(c, &whole)) return -1;
    double r = whole, scale = 1.0;
    if (c->at < c->len && c->s[c->at] == '.') {
        c->at++;
        size_t n = 0;
        while (c->at < c->len && c->s[c->at] >= '0' && c->s[c->at] <= '9' && n < 4) {
            frac = frac * 10 + (uint32_t)(c->s[c->at++] - '0');
            scale *= 10.0;
            n++;
        }
        if (n == 0 || n > 3) return -1;
    }
    *v = r + frac / scale;
    return 0;
}

int ocl_gemm_params_parse(const char *text, size_t len, uint64_t key, const ocl_gemm_limits *l,
                          ocl_gemm_params *out, double *gflops, char *why, size_t cap) {
    cursor c = {text, len, 0};
    uint64_t file_key;
    ocl_gemm_params p;
    uint32_t *const fields[6]         = {&p.mwg, &p.nwg, &p.kwg, &p.mdimc, &p.ndimc, &p.vwn};
    static const char *const names[6] = {"MWG=", " NWG=", " KWG=", " MDIMC=", " NDIMC=", " VWN="};
    *gflops                           = 0.0;
    if (!text || take(&c, OCL_GEMM_PARAMS_MAGIC "\n"))
        return fail(why, cap, "not a parameter file of this version", 0);
    if (take(&c, "key ") || take_hex64(&c, &file_key) || take(&c, "\n"))
        return fail(why, cap, "no key line", 0);
    if (file_key != key) return fail(why, cap, "written for another device, driver or kernel", 0);
    if (take(&c, "params ")) return fail(why, cap, "no params line", 0);
    for (int i = 0; i < 6; i++)
        if (take(&c, names[i]) || take_uint(&c, fields[i]))
            return fail(why, cap, "params line: field %u missing or not a number", (unsigned)i + 1);
    if (take(&c, "\n")) return fail(why, cap, "params line: trailing text", 0);
    if (take(&c, "block MR=") || take_uint(&c, &p.mr) || take(&c, " NR=") || take_uint(&c, &p.nr) ||
        take(&c, "\n"))
        return fail(why, cap, "no block line", 0);
    if (take(&c, "gflops ") || take_rate(&c, gflops) || take(&c, "\n"))
        return fail(why, cap, "no gflops line", 0);
    if (c.at != c.len) return fail(why, cap, "trailing text after line 5", 0);
    if (ocl_gemm_params_check(&p, l, why, cap)) return -1;
    *out = p;
    return 0;
}

void ocl_gemm_params_str(const ocl_gemm_params *p, char *out, size_t cap) {
    snprintf(out, cap, "MWG=%u NWG=%u KWG=%u MDIMC=%u NDIMC=%u VWN=%u", p->mwg, p->nwg, p->kwg,
             p->mdimc, p->ndimc, p->vwn);
}

int ocl_gemm_params_format(const ocl_gemm_params *p, uint64_t key, double gflops, char *out,
                           size_t cap) {
    char ps[96];
    ocl_gemm_params_str(p, ps, sizeof ps);
    if (!(gflops >= 0.0) || gflops > 999999.0) gflops = 0.0;
    int n =
        snprintf(out, cap,
                 OCL_GEMM_PARAMS_MAGIC "\nkey %016llx\nparams %s\nblock MR=%u NR=%u\ngflops %.1f\n",
                 (unsigned long long)key, ps, p->mr, p->nr, gflops);
    return n > 0 && (size_t)n < cap ? n : -1;
}
