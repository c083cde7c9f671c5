/* ckpt's host stand-in for Deeploy's mchan_siracusa.h (the cluster DMA, mchan v7). It shadows Deeploy's
 * header, whose functions write hardware registers. The command word keeps the hardware layout: the low 17
 * bits are the length in bytes, then direction (1: external to local), incremental, 2-D external, event,
 * interrupt, broadcast and 2-D local flags. A transfer is done at once (host_runtime.c checks its bounds);
 * channels are tracked so a transfer the code never frees, or a wait on a channel it never allocated, stops
 * the run.
 */
#ifndef CKPT_HOST_MCHAN_SIRACUSA_H
#define CKPT_HOST_MCHAN_SIRACUSA_H

#include "pmsis.h"

#define MCHAN_TRANSFER_LEN_SIZE (17)
#define MCHAN_CHANNEL_ID_MAX (15)

#define MCHAN_CMD_FLAG_DIRECTION_LOC2EXT (0 << (MCHAN_TRANSFER_LEN_SIZE + 0))
#define MCHAN_CMD_FLAG_DIRECTION_EXT2LOC (1 << (MCHAN_TRANSFER_LEN_SIZE + 0))
#define MCHAN_CMD_FLAG_INCREMENTAL (1 << (MCHAN_TRANSFER_LEN_SIZE + 1))
#define MCHAN_CMD_FLAG_2D_TRANSFER_EXTERNAL (1 << (MCHAN_TRANSFER_LEN_SIZE + 2))
#define MCHAN_CMD_FLAG_EVENT_ENABLE (1 << (MCHAN_TRANSFER_LEN_SIZE + 3))
#define MCHAN_CMD_FLAG_INTERRUPT_ENABLE (1 << (MCHAN_TRANSFER_LEN_SIZE + 4))
#define MCHAN_CMD_FLAG_BROADCAST_FINISH (1 << (MCHAN_TRANSFER_LEN_SIZE + 5))
#define MCHAN_CMD_FLAG_2D_TRANSFER_LOCAL (1 << (MCHAN_TRANSFER_LEN_SIZE + 6))

static inline void mchan_transfer_1d(uint32_t cmd, void *loc, void *ext) {
  ckpt_mchan_transfer(cmd, loc, ext, 0, 0, 0, 0);
}

static inline void mchan_transfer_2d_loc_strided(uint32_t cmd, void *loc, void *ext, uint32_t loc_size_1d,
                                                 uint32_t loc_stride_2d) {
  ckpt_mchan_transfer(cmd, loc, ext, 0, 0, loc_size_1d, loc_stride_2d);
}

static inline void mchan_transfer_2d_ext_strided(uint32_t cmd, void *loc, void *ext, uint32_t ext_size_1d,
                                                 uint32_t ext_stride_2d) {
  ckpt_mchan_transfer(cmd, loc, ext, ext_size_1d, ext_stride_2d, 0, 0);
}

static inline void mchan_transfer_2d_loc_strided_ext_strided(uint32_t cmd, void *loc, void *ext,
                                                             uint32_t loc_size_1d, uint32_t loc_stride_2d,
                                                             uint32_t ext_size_1d, uint32_t ext_stride_2d) {
  ckpt_mchan_transfer(cmd, loc, ext, ext_size_1d, ext_stride_2d, loc_size_1d, loc_stride_2d);
}

static inline uint32_t mchan_channel_alloc(void) { return ckpt_mchan_channel_alloc(); }

static inline void mchan_channel_free(uint32_t channel_id) { ckpt_mchan_channel_free(channel_id); }

static inline uint32_t mchan_channel_is_busy(uint32_t channel_id) {
  return (uint32_t)ckpt_mchan_channel_busy(channel_id);
}

static inline void mchan_channel_wait(uint32_t channel_id) {
  while (mchan_channel_is_busy(channel_id))
    ;
}

#endif /* CKPT_HOST_MCHAN_SIRACUSA_H */
