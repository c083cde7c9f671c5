/* Cycle probes around each layer of the generated step (gvsoc.probes puts CKPT_PROBE_BEGIN/END around every
 * layer's call in RunNetwork). Each probe is one read of the cluster timer the harness's getCycles() reads,
 * stored in L1, so it costs a few cycles and no traffic to L2. CKPT_PROBE_COUNT is defined on the command line. */
#ifndef CKPT_PROBES_H
#define CKPT_PROBES_H
#include <stdint.h>
#include "pmsis.h"

extern PI_L1 uint32_t ckpt_probe_begin[CKPT_PROBE_COUNT];
extern PI_L1 uint32_t ckpt_probe_end[CKPT_PROBE_COUNT];
/* The timer's count, read with PMSIS's own event number: a header the generated code includes later (the training
 * branch's perf_utils.h) redefines PI_PERF_CYCLES as a core counter's, which the harness does not start. */
static inline uint32_t ckpt_probe_now(void) { return pi_perf_cl_read(PI_PERF_CYCLES); }
#define CKPT_PROBE_BEGIN(k) (ckpt_probe_begin[k] = ckpt_probe_now())
#ifdef CKPT_PROBE_SUM
/* A step run many times (the training harness's mini-batches): each probe sums its layer's cycles over the runs,
 * from 0, and the report's END is that sum. */
#define CKPT_PROBE_END(k) (ckpt_probe_end[k] += ckpt_probe_now() - ckpt_probe_begin[k])
#else
#define CKPT_PROBE_END(k) (ckpt_probe_end[k] = ckpt_probe_now())
#endif

/* Prints one line per probe: "ckpt-probe K BEGIN END" (cycles of the harness's timer; with CKPT_PROBE_SUM, BEGIN
 * is 0 and END the sum). */
void ckpt_probe_report(void);
#endif
