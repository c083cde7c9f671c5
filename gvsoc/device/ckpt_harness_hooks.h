/* Forced into Deeploy's harness (deeploytest.c, or the training branch's deeploytraintest.c; gcc -include): after
 * the harness stops its timer around a step, the per-layer probes are printed, so printing costs no measured
 * cycle. With CKPT_STATE_AFTER (the training harness: its mini-batches and updates), the last time it stops its
 * timer a hash of every train-network input is printed too (ckpt_state.c): what the run left in the weights and
 * accumulators, which the harness's own check (the losses) does not look at. Nothing else of the harness changes. */
#include "CycleCounter.h"
#include "ckpt_probes.h"
#ifdef CKPT_STATE_AFTER
void ckpt_state_report(void);
static unsigned ckpt_timer_stops;
#define StopTimer() \
  (StopTimer(), ckpt_probe_report(), (++ckpt_timer_stops == CKPT_STATE_AFTER ? ckpt_state_report() : (void)0))
#else
#define StopTimer() (StopTimer(), ckpt_probe_report())
#endif
