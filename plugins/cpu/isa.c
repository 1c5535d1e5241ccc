/* isa.c — run-time ISA detection and the choice of kernel table.
 *
 * On x86-64, cpuid says what the processor implements and XGETBV (XCR0) what state the
 * operating system saves on a context switch: AVX needs the YMM state, AVX-512 the opmask
 * and ZMM states, AMX the tile configuration and tile data states. Linux also hands out the
 * AMX tile data state only on request (arch_prctl ARCH_REQ_XCOMP_PERM); a refusal leaves
 * AMX off. A feature counts only when the processor has it and the OS enables its state.
 *
 * Paths, lowest to highest: portable C, AVX2+FMA(+F16C), AVX-512F, AVX512-BF16, AMX-BF16.
 * The option isa=NAME and the environment variable AMPX_CPU_ISA each cap the path; the path
 * in use is the highest one the machine supports that no cap excludes, and then the best
 * kernel table at or below it: portable (portable.c), avx2 (avx2.c), avx512 and avx512bf16
 * (avx512.c).
 * The AMX path is detected and reported but runs the avx512bf16 table (see docs/CPU.md).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define CPU_X86 1
#else
#define CPU_X86 0
#endif

static const char *const isa_names[CPU_ISA_COUNT] = {"portable", "avx2", "avx512", "avx512bf16",
                                                     "amx"};

const char *cpu_isa_name(cpu_isa isa) {
    return isa >= 0 && isa < CPU_ISA_COUNT ? isa_names[isa] : "?";
}

int cpu_isa_parse(const char *s, cpu_isa *out) {
    if (strcmp(s, "auto") == 0) {
        *out = CPU_ISA_COUNT - 1;
        return 0;
    }
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (strcmp(s, isa_names[i]) == 0) {
            *out = (cpu_isa)i;
            return 0;
        }
    return -1;
}

// ---------------------------------------------------------------------------------------
// Detection

#if CPU_X86
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Linux: ask for the AMX tile data state (XFEATURE 18). 0 when granted. */
static int request_amx(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    const long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0 ? 0 : -1;
#else
    return -1;
#endif
}
#endif

static void detect(cpu_features *f) {
    memset(f, 0, sizeof *f);
#if CPU_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int osxsave = (c >> 27) & 1;
    f->fma      = (c >> 12) & 1;
    f->f16c     = (c >> 29) & 1;
    int has_avx = (c >> 28) & 1;
    if (!osxsave) return; /* the OS saves no extended state: SSE only */
    uint64_t xcr0   = read_xcr0();
    int ymm_on      = (xcr0 & 0x6) == 0x6;         /* SSE and AVX state */
    int zmm_on      = (xcr0 & 0xe6) == 0xe6;       /* plus opmask, ZMM_Hi256, Hi16_ZMM */
    int tiles_on    = (xcr0 & 0x60000) == 0x60000; /* XTILECFG and XTILEDATA */
    f->avx          = has_avx && ymm_on;
    unsigned max_lf = __get_cpuid_max(0, NULL);
    if (max_lf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2      = f->avx && ((b >> 5) & 1);
        f->avx512f   = zmm_on && ((b >> 16) & 1);
        f->avx512bw  = zmm_on && ((b >> 30) & 1);
        f->avx512vl  = zmm_on && ((b >> 31) & 1);
        f->avx512dq  = zmm_on && ((b >> 17) & 1);
        int amx_tile = (d >> 24) & 1, amx_bf16 = (d >> 22) & 1;
        unsigned sub = a;
        if (sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f->avx512bf16 = zmm_on && ((a >> 5) & 1);
        }
        f->amx_hw = amx_tile && amx_bf16 && tiles_on;
    }
    if (!f->avx) f->fma = f->f16c = 0; /* VEX-encoded: unusable without the YMM state */
#endif
}

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static cpu_features detected;

static void detect_run(void) {
    detect(&detected);
}

const cpu_features *cpu_detect(void) {
    pthread_once(&detect_once, detect_run);
    return &detected;
}

/* The highest path the processor and OS support, AMX aside (that needs permission). The
 * AVX-512 tables are compiled for F, BW, VL and DQ (every AVX-512 CPU since Skylake-SP). */
static cpu_isa best_without_amx(const cpu_features *f) {
    int avx512 = f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->fma && f->f16c;
    if (avx512 && f->avx512bf16) return CPU_ISA_AVX512BF16;
    if (avx512) return CPU_ISA_AVX512;
    if (f->avx2 && f->fma && f->f16c) return CPU_ISA_AVX2;
    return CPU_ISA_PORTABLE;
}

void cpu_features_str(const cpu_features *f, char *out, size_t cap) {
    snprintf(out, cap, "%s%s%s%s%s%s%s%s%s%s", f->avx ? "avx," : "", f->avx2 ? "avx2," : "",
             f->fma ? "fma," : "", f->f16c ? "f16c," : "", f->avx512f ? "avx512f," : "",
             f->avx512bw ? "avx512bw," : "", f->avx512vl ? "avx512vl," : "",
             f->avx512dq ? "avx512dq," : "", f->avx512bf16 ? "avx512bf16," : "",
             f->amx_hw ? "amx-bf16," : "");
    size_t n = strlen(out);
    if (n > 0)
        out[n - 1] = '\0';
    else
        snprintf(out, cap, "none");
}

cpu_isa cpu_isa_select(cpu_isa cap, const cpu_kernels **kern, int *amx_denied) {
    const cpu_features *f = cpu_detect();
    cpu_isa best          = best_without_amx(f);
    *amx_denied           = 0;
#if CPU_X86
    if (cap >= CPU_ISA_AMX && f->amx_hw && best >= CPU_ISA_AVX512) {
        if (request_amx() == 0)
            best = CPU_ISA_AMX;
        else
            *amx_denied = 1; /* the kernel refused the tile state: stay below AMX */
    }
#endif
    cpu_isa isa = cap < best ? cap : best;
    /* The best table at or below the path: AMX has no table of its own yet. */
#if CPU_HAVE_AVX2_TABLE
    *kern = isa >= CPU_ISA_AVX512BF16 ? &cpu_kernels_avx512bf16
            : isa == CPU_ISA_AVX512   ? &cpu_kernels_avx512
            : isa == CPU_ISA_AVX2     ? &cpu_kernels_avx2
                                      : &cpu_kernels_portable;
#else
    *kern = &cpu_kernels_portable;
#endif
    return isa;
}
