/* A toy "generated step" for ckpt's host runtime tests: the same interface as Deeploy's Network.h (inputs and
 * outputs tables, InitNetwork/RunNetwork), doubling an 8x8 float matrix kept in L3. */
#ifndef TOY_NETWORK_H
#define TOY_NETWORK_H
#include <stdint.h>
#include "pmsis.h"
#include "dory_mem.h"
#include "mchan_siracusa.h"
void RunNetwork(uint32_t core_id, uint32_t numThreads);
void InitNetwork(uint32_t core_id, uint32_t numThreads);
extern void *DeeployNetwork_inputs[1];
extern void *DeeployNetwork_outputs[1];
static const uint32_t DeeployNetwork_num_inputs = 1;
static const uint32_t DeeployNetwork_num_outputs = 1;
static const uint32_t DeeployNetwork_inputs_bytes[1] = {256};
static const uint32_t DeeployNetwork_outputs_bytes[1] = {256};
#endif
