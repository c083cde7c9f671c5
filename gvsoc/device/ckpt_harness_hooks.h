/* Forced into Deeploy's harness (deeploytest.c, or the training branch's deeploytraintest.c; gcc -include): after
 * the harness stops its timer around a step, the per-layer probes are printed, so printing costs no measured
 * cycle. With CKPT_STATE_AFTER (the training harness: its mini-batches and updates), the last time it stops its
 * timer a hash of every train-network input is printed too (ckpt_state.c): what the run left in the weights and
 * accumulators, which the harness's own check (the losses) does not look at.
 *
 * Every task the harness sends to the cluster gets, on its master core, the stack the harness asks for
 * (MAINSTACKSIZE, where the harness sends it) plus CKPT_NETWORK_FRAME, the largest frame of the generated
 * network's functions (gvsoc.step measures it): the harness's fixed stack is then left whole to what the network
 * calls, however large the network's own frame. Nothing else of the harness changes. */
#include "pmsis.h"
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

#ifndef CKPT_NETWORK_FRAME
#define CKPT_NETWORK_FRAME 0
#endif
static inline int ckpt_send_task_to_cl(struct pi_device *device, struct pi_cluster_task *task) {
  task->stack_size += CKPT_NETWORK_FRAME;
  int failed = pi_cluster_send_task_to_cl(device, task);
  if (failed) {
    printf("ERROR: ckpt: the cluster did not take a task: its stacks (%d B on the master core) do not fit L1\n",
           task->stack_size);
    pmsis_exit(-5);
  }
  task->stack_size -= CKPT_NETWORK_FRAME;     /* as the harness set it, should it send the task again unchanged */
  return failed;
}
#define pi_cluster_send_task_to_cl(device, task) ckpt_send_task_to_cl(device, task)
