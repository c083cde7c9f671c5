/* bench/fpu_lock.py's program: gvsoc's Siracusa cluster shares four FPUs among its eight cores (core c and core
 * c + 4 share one). Every core runs the same 1x7 register-blocked dot loop (one operand load, seven of the other,
 * seven fmadd.s in a row, as Deeploy's forward MatMul kernel compiles), cores 4..7 starting OFFSET cycles after
 * cores 0..3 (a sled of no-ops after a barrier). Per offset and core it prints the cycles the loop kept the core
 * busy and the cycles it stalled on its shared FPU (performance counters 0 and 18, read from the core's CSRs).
 * FPU_LOCK_OFFSETS is defined on the command line (a comma-separated list, each below SLED). */
#include "pmsis.h"
#include <stdio.h>

#define CORES 8
#define ROWS 4
#define DEPTH 64
#define COLS 28
#define SLED 64

PI_L1 static float operand[CORES][ROWS * DEPTH];
PI_L1 static float weights[DEPTH * COLS];
PI_L1 static float result[CORES][ROWS * COLS];
static const int offsets[] = {FPU_LOCK_OFFSETS};
#define COUNT ((int)(sizeof(offsets) / sizeof(offsets[0])))
PI_L1 static unsigned busy[COUNT][CORES];
PI_L1 static unsigned stalled[COUNT][CORES];

static void dot_1x7(const float *a, const float *b, float *out) {
  for (int r = 0; r < ROWS; r++) {
    for (int c = 0; c < COLS; c += 7) {
      const float *row = a + r * DEPTH;
      const float *col = b + c;
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0;
      for (int k = 0; k < DEPTH; k++, col += COLS) {
        float v = row[k];
        float b0 = col[0], b1 = col[1], b2 = col[2], b3 = col[3], b4 = col[4], b5 = col[5], b6 = col[6];
        s0 += v * b0; s1 += v * b1; s2 += v * b2; s3 += v * b3; s4 += v * b4; s5 += v * b5; s6 += v * b6;
      }
      float *o = out + r * COLS + c;
      o[0] = s0; o[1] = s1; o[2] = s2; o[3] = s3; o[4] = s4; o[5] = s5; o[6] = s6;
    }
  }
}

/* exactly `n` uncompressed no-ops: a jump into a sled of SLED of them, n before its end */
static void __attribute__((noinline)) wait_nops(int n) {
  __asm__ volatile(".option push\n.option norvc\n"
                   "  la t0, 1f\n  slli t1, %0, 2\n  sub t0, t0, t1\n  jr t0\n"
                   "  .rept 64\n  nop\n  .endr\n"
                   "1:\n.option pop\n" :: "r"(n) : "t0", "t1");
}

static void counters_off(void) { __asm__ volatile("csrw 0xCC1, zero"); }
static void counters_on(void) {
  unsigned events = (1u << 0) | (1u << 18), on = 1;
  __asm__ volatile("csrw 0x79F, zero");          /* every counter to 0 */
  __asm__ volatile("csrw 0xCC0, %0" :: "r"(events));
  __asm__ volatile("csrw 0xCC1, %0" :: "r"(on));
}
static unsigned counter_cycles(void) { unsigned v; __asm__ volatile("csrr %0, 0x780" : "=r"(v)); return v; }
static unsigned counter_fpu_stalls(void) { unsigned v; __asm__ volatile("csrr %0, 0x792" : "=r"(v)); return v; }

static void each_core(void *arg) {
  (void)arg;
  int core = pi_core_id();
  for (int i = 0; i < ROWS * DEPTH; i++) operand[core][i] = (float)((i + core) % 7) * 0.5f;
  if (core == 0)
    for (int i = 0; i < DEPTH * COLS; i++) weights[i] = (float)(i % 5) * 0.25f;
  for (int pass = 0; pass < 2; pass++) {           /* the first pass warms the instruction caches */
    for (int t = 0; t < COUNT; t++) {
      pi_cl_team_barrier();
      counters_off();
      wait_nops(core >= CORES / 2 ? offsets[t] : 0);
      counters_on();
      dot_1x7(operand[core], weights, result[core]);
      counters_off();
      busy[t][core] = counter_cycles();
      stalled[t][core] = counter_fpu_stalls();
    }
  }
}

static void on_cluster(void *arg) { pi_cl_team_fork(CORES, each_core, arg); }

int main(void) {
  struct pi_device cluster;
  struct pi_cluster_conf conf;
  struct pi_cluster_task task;
  pi_cluster_conf_init(&conf);
  conf.id = 0;
  pi_open_from_conf(&cluster, &conf);
  if (pi_cluster_open(&cluster)) {
    printf("fpu-lock: the cluster did not open\n");
    return -1;
  }
  pi_cluster_task(&task, on_cluster, NULL);
  pi_cluster_send_task_to_cl(&cluster, &task);
  pi_cluster_close(&cluster);
  for (int t = 0; t < COUNT; t++) {
    printf("fpu-lock %d", offsets[t]);
    for (int c = 0; c < CORES; c++) printf(" %u %u", busy[t][c], stalled[t][c]);
    printf("\n");
  }
  return 0;
}
