/* What ckpt's host runtime (host_runtime.c) exposes to its harness (host_main.c): the L3 address space and
 * the tallies of what the code did. Not seen by the generated code. */
#ifndef CKPT_HOST_RUNTIME_H
#define CKPT_HOST_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MIN_U32(a, b) ((uint32_t)(a) < (uint32_t)(b) ? (uint32_t)(a) : (uint32_t)(b))

typedef struct {
  long current;       /* bytes allocated now */
  long peak;          /* the most bytes allocated at once */
  uint64_t allocated; /* bytes of all allocations ever made */
} ckpt_level_t;

typedef struct {
  ckpt_level_t level[3]; /* L1, L2, L3 */
  uint64_t forks, dma_transfers, dma_bytes, ram_copies, ram_bytes;
} ckpt_counters_t;

extern ckpt_counters_t ckpt_counters;

int ckpt_is_l3(const void *p);
void *ckpt_l3_bytes(const void *p, size_t n, const char *what);
char *ckpt_read_file(const char *filename, size_t *size); /* malloc'ed; faults when no folder has it */
void ckpt_write_tallies(FILE *f); /* the tallies as JSON members: "levels": {...}, "forks": ..., ... */

#endif /* CKPT_HOST_RUNTIME_H */
