/* Cycle probes around each layer of the generated step (gvsoc.probes puts CKPT_PROBE_BEGIN/END around every
 * layer's call in RunNetwork). Each probe is one read of the cluster timer the harness's getCycles() reads,
 * stored in L1, so it costs a few cycles and no traffic to L2. CKPT_PROBE_COUNT is defined on the command line. */
#ifndef CKPT_PROBES_H
#define CKPT_PROBES_H
#include <stdint.h>
#include "pmsis.h"

extern PI_L1 uint32_t ckpt_probe_begin[CKPT_PROBE_COUNT];
extern PI_L1 uint32_t ckpt_probe_end[CKPT_PROBE_COUNT];
#define CKPT_PROBE_BEGIN(k) (ckpt_probe_begin[k] = pi_perf_cl_read(PI_PERF_CYCLES))
#define CKPT_PROBE_END(k) (ckpt_probe_end[k] = pi_perf_cl_read(PI_PERF_CYCLES))

/* Prints one line per probe: "ckpt-probe K BEGIN END" (cycles of the harness's timer). */
void ckpt_probe_report(void);
#endif
