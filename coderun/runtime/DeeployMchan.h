/* ckpt's host stand-in for Deeploy's GAP9 DeeployMchan.h (TargetLibraries/GAP9/inc: DORY's mchan.h configured for
 * GAP9's cluster DMA, mchan v7). It shadows Deeploy's header, whose functions write the DMA's registers. The
 * generated GAP9 code fills a `mchan_transfer_t` and pushes it:
 *   { mchan_transfer_t t = { .cmd = C, .size = N, .loc = L, .ext = E }; mchan_transfer_push_1d(t); }
 * On GAP9 the address fields are written to 32-bit registers; here they are pointer-wide, as the host's are.
 * The command word keeps the hardware layout (the low 17 bits the length, then direction, incremental, 2-D
 * external, event flags), so a transfer of 2^17 B or more cannot be said in it: its length carries into the
 * direction bit. A push whose length is not its command's (so, one of 2^17 B or more) stops the run naming it,
 * as does one the device would misdirect; the rest is done at once by the runtime's DMA (host_runtime.c), which
 * checks its bounds. `mchan_transfer_get_id` takes a channel that `mchan_transfer_free` gives back, so a
 * transfer never freed, or a wait on one never taken, stops the run too.
 */
#ifndef CKPT_HOST_DEEPLOY_MCHAN_H
#define CKPT_HOST_DEEPLOY_MCHAN_H

#include "pmsis.h"

typedef struct {
  int cmd;
  int size;

  void *loc;
  int loc_size_1d;
  int loc_stride_1d;

  void *ext;
  int ext_size_1d;
  int ext_stride_1d;
} mchan_transfer_t;

/* The push of one transfer, 1-D or 2-D on its external side (host_runtime.c). */
void ckpt_gap9_mchan_push(const mchan_transfer_t *transfer, int two_d);

static inline int mchan_transfer_get_id(void) { return (int)ckpt_mchan_channel_alloc(); }

static inline void mchan_transfer_push_1d(mchan_transfer_t transfer) { ckpt_gap9_mchan_push(&transfer, 0); }

static inline void mchan_transfer_push_2d(mchan_transfer_t transfer) { ckpt_gap9_mchan_push(&transfer, 1); }

static inline void mchan_transfer_free(int tid) { ckpt_mchan_channel_free((uint32_t)tid); }

static inline int mchan_transfer_busy(int tid) { return ckpt_mchan_channel_busy((uint32_t)tid); }

static inline void mchan_transfer_wait(int tid) {
  while (mchan_transfer_busy(tid))
    ;
}

#endif /* CKPT_HOST_DEEPLOY_MCHAN_H */
