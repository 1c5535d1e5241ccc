/* watch.h — the hooks that watch a step, as the trainer sets them up, and what the monitor
 * (monitor.c, headroom.c) and the armed forensics (forensics.c) share. */
#ifndef AMPX_WATCH_H
#define AMPX_WATCH_H

#include <string.h>

#include "exec/trainer.h"

/* The gradient-health monitor, every `every` steps; 0: off (monitor.c). Per ring slot of
 * buf: the loss scale (f32, padded to 16 bytes), then for the parameters and then for the
 * scanned node outputs (n_scan per micro-batch): 4 f32 stats each, 3 i32 counts each, an i32
 * NaN count each. */
typedef struct tr_monitor {
    int64_t every;
    int ready, live; /* live: this micro-batch, the nodes' outputs are scanned */
    ampx_buffer *buf;
    uint64_t slot_bytes;
    ampx_dtype compute[TR_MAX_PARAMS]; /* per parameter: its layer's compute dtype */
    ampx_dtype target[TR_MAX_PARAMS];  /* its grad_stats target: f16, bf16, else f32 */
    char layer[TR_MAX_PARAMS][G_NAME_MAX];
    int *scan_first, *scan_count; /* per node: first scan position and count */
    int *scan_value, *scan_node;  /* per scan position: the value, its node */
    int *value_scan;              /* per value: its scan position, -1: not scanned */
    int n_scan;
    uint64_t slot_cur;   /* offset of the monitored step's slot */
    unsigned char *host; /* host copy of the monitor slots at a flush */
    ampx_tensor_health health[TR_MAX_PARAMS];
    char first_nonfinite[320];
    char origin[768];            /* how the first non-finite value came to be */
    char created_by[G_NAME_MAX]; /* the node that created it from finite inputs, or "" */
    /* headroom (monitor.c): per scan position, its last HR_HIST monitored (step, log2 max
     * |x|), how many there are and whether it has been warned of */
    float *hr_step, *hr_log2;
    int *hr_count;
    unsigned char *hr_warned;
    char hr_tensor[G_NAME_MAX], hr_warning[512];
    /* armed forensics (forensics.c, train.forensics): on the steps the monitor does not scan,
     * ABS_MAX of every scanned output into a slot of fbuf (the loss scale first); lean_live:
     * this micro-batch is scanned so. Per scan position, the last step whose values were all
     * finite: their max |x| and the loss scale they carried (the safe-scale estimate). */
    int armed, lean_live;
    ampx_buffer *fbuf;
    uint64_t fslot_bytes, fslot_cur;
    unsigned char *fhost;
    float *fr_max, *fr_scale;
    int64_t *fr_step;
} tr_monitor;

/* Whether 1-based step step1 is a monitored one. */
static inline int tr_monitored(const ampx_trainer *t, int64_t step1) {
    return t->mon->every > 0 && step1 % t->mon->every == 0;
}

/* How many of the n steps a flush reads (from the ring's first) are monitored ones. */
static inline int64_t tr_monitored_in_flush(const ampx_trainer *t, int64_t n) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        k += tr_monitored(t, t->ring.first + i + 1);
    return k;
}

/* monitor_scan_setup: which outputs are scanned (the positions both scans write);
 * monitor_setup also allocates the monitored steps' slots; forensics_setup arms the
 * forensics (train.forensics). */
ampx_status monitor_scan_setup(ampx_trainer *t);
ampx_status monitor_setup(ampx_trainer *t);
ampx_status forensics_setup(ampx_trainer *t);

/* A step's slot as the forensics read it: a monitor slot (GRAD_STATS of every scanned
 * output) or an armed one (FR_HEAD bytes, the loss scale first, then ABS_MAX's f32 per scan
 * position per micro-batch). */
#define FR_HEAD 16
typedef struct scan_view {
    const unsigned char *slot;
    int lean; /* 1: an armed slot */
} scan_view;
typedef struct scan_value {
    float max_abs;     /* the largest finite |x| (armed: when every value is finite, else 0) */
    int32_t nonfinite; /* how many values are non-finite (armed: 1 when any) */
    int32_t nan;       /* of them NaN (armed: 1 when the largest is NaN); -1: not counted */
} scan_value;
/* The first non-finite output of a step and how it came to be, into t->mon's first_nonfinite,
 * origin and created_by; then (monitor_note_finite) each position's last all-finite step. */
void monitor_diagnose(ampx_trainer *t, const scan_view *v);
void monitor_note_finite(ampx_trainer *t, const scan_view *v, int64_t step);
/* The float outputs node `node` scans, as tensors and element counts; how many (<= G_MAX_OUT). */
int monitor_scan_list(const ampx_trainer *t, executor *x, int node, ampx_tensor *ts, uint64_t *ns);

/* monitor.c: the headroom figures and warning of a monitored step's record, from monitor
 * slot bytes ms; headroom_free releases the history. */
void headroom_read(ampx_trainer *t, const unsigned char *ms, ampx_step_record *r);
void headroom_free(ampx_trainer *t);

// ---------------------------------------------------------------------------------------
// A monitor slot: the loss scale (f32, padded to 16 bytes), then for the parameters and then
// for the scanned node outputs (n_scan per micro-batch): 4 f32 stats each, 3 i32 counts each,
// an i32 NaN count each

#define MON_SCALE 0
static inline uint64_t mon_off(const ampx_trainer *t, int part) {
    uint64_t P = (uint64_t)t->n_params, S = (uint64_t)t->mon->n_scan * (uint64_t)t->A;
    uint64_t offs[] = {16,
                       16 + 16 * P,
                       16 + 28 * P,
                       16 + 32 * P,
                       16 + 32 * P + 16 * S,
                       16 + 32 * P + 28 * S,
                       16 + 32 * P + 32 * S};
    return offs[part];
}
enum { MON_PSTATS, MON_PCOUNTS, MON_PNAN, MON_SSTATS, MON_SCOUNTS, MON_SNAN, MON_END };

/* Scan position s of micro-batch a in a monitor slot: its statistics and counts
 * (GRAD_STATS), and its NaN count when nan is not NULL (-1: the backend does not count them). */
static inline void scan_read(const ampx_trainer *t, const unsigned char *slot, int64_t a, int s,
                             float st[4], int32_t cn[3], int32_t *nan) {
    uint64_t at = (uint64_t)(a * t->mon->n_scan + s);
    memcpy(st, slot + mon_off(t, MON_SSTATS) + 16 * at, 16);
    memcpy(cn, slot + mon_off(t, MON_SCOUNTS) + 12 * at, 12);
    if (nan) memcpy(nan, slot + mon_off(t, MON_SNAN) + 4 * at, 4);
}

/* The largest finite value of dtype dt. */
static inline double watch_dtype_max(ampx_dtype dt) {
    return dt == AMPX_F16    ? 65504.0
           : dt == AMPX_BF16 ? 3.3895313892515355e38
                             : 3.4028234663852886e38;
}

#endif
