#include "ckpt_probes.h"
#include <stdio.h>

PI_L1 uint32_t ckpt_probe_begin[CKPT_PROBE_COUNT];
PI_L1 uint32_t ckpt_probe_end[CKPT_PROBE_COUNT];

void ckpt_probe_report(void) {
  printf("ckpt-probes %d\n", CKPT_PROBE_COUNT);
  for (int k = 0; k < CKPT_PROBE_COUNT; k++)
#ifdef CKPT_PROBE_SUM
    printf("ckpt-probe %d 0 %u\n", k, (unsigned)ckpt_probe_end[k]);
#else
    printf("ckpt-probe %d %u %u\n", k, (unsigned)ckpt_probe_begin[k], (unsigned)ckpt_probe_end[k]);
#endif
}
