/* A hash of every train-network input when the training harness has run (see ckpt_harness_hooks.h): one line
 * "ckpt-state I BYTES HASH" per input, FNV-1a over its bytes, read through L2 where the input lives in L3. It runs
 * on the fabric controller (integer work only) after the timer has stopped. */
#include <stdint.h>
#include <stdio.h>

#include "TrainingNetwork.h"
#include "dory_mem.h"
#include "pmsis.h"

#define CKPT_CHUNK 256

static uint32_t fnv1a(uint32_t hash, const uint8_t *bytes, uint32_t n) {
  for (uint32_t k = 0; k < n; k++)
    hash = (hash ^ bytes[k]) * 16777619u;
  return hash;
}

void ckpt_state_report(void) {
  static uint8_t chunk[CKPT_CHUNK];
  for (uint32_t i = 0; i < DeeployNetwork_num_inputs; i++) {
    uint8_t *p = (uint8_t *)DeeployNetwork_inputs[i];
    uint32_t size = DeeployNetwork_inputs_bytes[i], hash = 2166136261u;
    int on_chip = (uint32_t)p >= 0x10000000u;
    for (uint32_t at = 0; at < size; at += CKPT_CHUNK) {
      uint32_t n = size - at < CKPT_CHUNK ? size - at : CKPT_CHUNK;
      if (on_chip) {
        hash = fnv1a(hash, p + at, n);
      } else {
        ram_read(chunk, p + at, n);
        hash = fnv1a(hash, chunk, n);
      }
    }
    printf("ckpt-state %u %u %08x\n", (unsigned)i, (unsigned)size, (unsigned)hash);
  }
}
