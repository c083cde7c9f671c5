/* The toy step (see Network.h): for each half of the columns, a 2-D RAM copy brings 8 rows of 4 floats from
 * L3 to L2, the cluster DMA moves them to L1, all cores double them (each core its share, then a barrier), and
 * the way back writes them to the output in L3. The line marked FAULT is replaced by the tests. */
#include "Network.h"
#include "DeeployMchan.h" /* GAP9's DMA, which the tests use too */

#define ROWS 8
#define COLS 8
#define HALF (COLS / 2)
#define TILE_BYTES (ROWS * HALF * 4)

void *DeeployNetwork_inputs[1];
void *DeeployNetwork_outputs[1];
static float *l3_in, *l3_out, *l2_tile, *l1_tile;

static void double_tile(void *arg) {
  float *tile = (float *)arg;
  for (int i = pi_core_id(); i < ROWS * HALF; i += NUM_CORES)
    tile[i] *= 2.0f;
  pi_cl_team_barrier();
}

void InitNetwork(uint32_t core_id, uint32_t numThreads) {
  (void)core_id;
  (void)numThreads;
  l3_in = cl_ram_malloc(ROWS * COLS * 4);
  l3_out = cl_ram_malloc(ROWS * COLS * 4);
  load_file_to_ram(l3_in, "0.hex");
  l2_tile = pi_l2_malloc(TILE_BYTES);
  l1_tile = pmsis_l1_malloc(TILE_BYTES);
  DeeployNetwork_inputs[0] = l3_in;
  DeeployNetwork_outputs[0] = l3_out;
}

void RunNetwork(uint32_t core_id, uint32_t numThreads) {
  (void)core_id;
  (void)numThreads;
  pi_cl_ram_req_t req = {0};
  for (int half = 0; half < 2; half++) {
    pi_cl_ram_copy_2d(get_ram_ptr(), l3_in + half * HALF, l2_tile, TILE_BYTES, COLS * 4, HALF * 4, 1, &req);
    pi_cl_ram_copy_wait(&req);
    uint32_t channel = mchan_channel_alloc();
    mchan_transfer_1d(TILE_BYTES | MCHAN_CMD_FLAG_DIRECTION_EXT2LOC | MCHAN_CMD_FLAG_INCREMENTAL, l1_tile, l2_tile);
    mchan_channel_wait(channel);
    mchan_channel_free(channel);
    pi_cl_team_fork(NUM_CORES, double_tile, l1_tile);
    channel = mchan_channel_alloc();
    mchan_transfer_1d(TILE_BYTES | MCHAN_CMD_FLAG_INCREMENTAL, l1_tile, l2_tile);
    mchan_channel_wait(channel);
    mchan_channel_free(channel);
    /* FAULT */
    pi_cl_ram_copy_2d(get_ram_ptr(), l3_out + half * HALF, l2_tile, TILE_BYTES, COLS * 4, HALF * 4, 0, &req);
    pi_cl_ram_copy_wait(&req);
  }
}
