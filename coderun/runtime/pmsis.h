/* ckpt's host stand-in for the part of PMSIS (the PULP runtime API) that Deeploy's generated Siracusa code
 * and its fp32 kernels call. It is not PMSIS: it is the smallest runtime under which that C runs on a Linux
 * host with the same meaning.
 *
 * The model of the device it implements (host_runtime.c):
 *  - the cluster's NUM_CORES cores are threads; pi_cl_team_fork runs an entry on all of them and returns when
 *    all are done; pi_cl_team_barrier is a barrier among them; the calling (master) core is core 0;
 *  - L1 and L2 are host memory, at addresses whose low 32 bits are those of on-chip memory (0x10000000 and up);
 *    L3 (the external RAM) is a separate address space below that: the pointers the code holds into it are
 *    not readable or writable by the cores (a stray dereference faults, as on the device), only the RAM copies
 *    and file loads reach it, and each copy must stay inside one allocation;
 *  - DMA (mchan) and RAM copies are done at once, so a wait always finds them complete;
 *  - allocation sizes per level are tallied, so the run reports what the code reserved.
 * The harness's own entry point (host_main.c) plays deeploytest.c's part; the training branch's harness,
 * deeploytraintest.c, runs as it is, with host_train.c beside it.
 */
#ifndef CKPT_HOST_PMSIS_H
#define CKPT_HOST_PMSIS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NUM_CORES
#error "NUM_CORES must be defined (the cluster's core count the code was generated for)"
#endif

/* Placement attributes: every host address is reachable, so they place nothing. */
#define PI_L1
#define PI_L2
#define PI_CL_L1
#define PI_FC_L1
#define PI_L1_SHARED

/* Deeploy's LOG2 macro uses the PULP "find last 1" builtin: the index of the highest set bit. */
#define __builtin_pulp_fl1(x) (31 - __builtin_clz((uint32_t)(x)))

struct pi_device {
  void *data;
};

/* A RAM copy request; the generated code reads `size` to know whether a copy is pending. */
typedef struct {
  uint32_t size;
  int done;
} pi_cl_ram_req_t;

typedef struct {
  void *result;
} pi_cl_ram_alloc_req_t;

typedef struct {
  int done;
} pi_cl_ram_free_req_t;

/* Cluster team */
int pi_core_id(void);
int pi_cluster_id(void);
int pi_cl_cluster_nb_cores(void);
int pi_cl_team_nb_cores(void);
void pi_cl_team_fork(int nb_cores, void (*entry)(void *), void *arg);
void pi_cl_team_barrier(); /* no prototype, as PMSIS declares it: the training branch's kernels pass it a 0 */

/* L1 / L2 allocation */
void *pmsis_l1_malloc(uint32_t size);
void pmsis_l1_malloc_free(void *ptr, uint32_t size);
void *pi_l1_malloc(void *device, uint32_t size);
void pi_l1_free(void *device, void *ptr, uint32_t size);
void *pi_l2_malloc(uint32_t size);
void pi_l2_free(void *ptr, uint32_t size);

/* External RAM (L3). The RAM address is a pointer on this host (a uint32_t on the device). */
void pi_cl_ram_read(struct pi_device *device, void *ram_addr, void *addr, uint32_t size, pi_cl_ram_req_t *req);
void pi_cl_ram_write(struct pi_device *device, void *ram_addr, void *addr, uint32_t size, pi_cl_ram_req_t *req);
void pi_cl_ram_copy(struct pi_device *device, void *ram_addr, void *addr, uint32_t size, int ext2loc,
                    pi_cl_ram_req_t *req);
void pi_cl_ram_copy_2d(struct pi_device *device, void *ram_addr, void *addr, uint32_t size, uint32_t stride,
                       uint32_t length, int ext2loc, pi_cl_ram_req_t *req);
void pi_cl_ram_copy_wait(pi_cl_ram_req_t *req);
void pi_cl_ram_read_wait(pi_cl_ram_req_t *req);
void pi_cl_ram_write_wait(pi_cl_ram_req_t *req);

/* The cluster DMA (mchan_siracusa.h is the interface the code uses). */
void ckpt_mchan_transfer(uint32_t cmd, void *loc, void *ext, uint32_t ext_size_1d, uint32_t ext_stride_2d,
                         uint32_t loc_size_1d, uint32_t loc_stride_2d);
uint32_t ckpt_mchan_channel_alloc(void);
void ckpt_mchan_channel_free(uint32_t channel);
int ckpt_mchan_channel_busy(uint32_t channel);

/* The cluster DMA as PMSIS offers it (pulp-trainlib's USE_DMA path, which Deeploy's kernels never take):
 * declared so that library compiles; run, it is a fault (host_runtime.c). */
typedef enum { PI_CL_DMA_DIR_LOC2EXT = 0, PI_CL_DMA_DIR_EXT2LOC = 1 } pi_cl_dma_dir_e;
typedef struct {
  uint32_t ext, loc, size, stride, length;
  pi_cl_dma_dir_e dir;
  int merge;
  uint32_t id;
} pi_cl_dma_copy_t;
typedef pi_cl_dma_copy_t pi_cl_dma_copy_2d_t;
void pi_cl_dma_memcpy(pi_cl_dma_copy_t *copy);
void pi_cl_dma_memcpy_2d(pi_cl_dma_copy_2d_t *copy);
void pi_cl_dma_wait(void *copy);

/* The cluster as the fabric controller drives it (the training harness, deeploytraintest.c): a task runs on the
 * cluster's master core (the calling thread, core 0) and returns when it is done. After each task the runtime
 * calls ckpt_after_task (weak; the training harness's host side defines it). */
struct pi_cluster_conf {
  int id;
};
struct pi_cluster_task {
  void (*entry)(void *);
  void *arg;
  uint32_t stack_size;
  uint32_t slave_stack_size;
};
void pi_cluster_conf_init(struct pi_cluster_conf *conf);
void pi_open_from_conf(struct pi_device *device, void *conf);
int pi_cluster_open(struct pi_device *device);
int pi_cluster_close(struct pi_device *device);
struct pi_cluster_task *pi_cluster_task(struct pi_cluster_task *task, void (*entry)(void *), void *arg);
int pi_cluster_send_task_to_cl(struct pi_device *device, struct pi_cluster_task *task);
void ckpt_after_task(void (*entry)(void *));

/* Performance counters: this host counts no cycles (gvsoc does), so every counter reads 0. */
#define CSR_PCER_CYCLES 0
#define CSR_PCER_INSTR 1
#define CSR_PCER_LD_STALL 2
#define CSR_PCER_JMP_STALL 3
#define CSR_PCER_IMISS 4
#define CSR_PCER_LD 5
#define CSR_PCER_ST 6
#define CSR_PCER_JUMP 7
#define CSR_PCER_BRANCH 8
#define CSR_PCER_TAKEN_BRANCH 9
#define CSR_PCER_RVC 10
#define CSR_PCER_LD_EXT 11
#define CSR_PCER_ST_EXT 12
#define CSR_PCER_LD_EXT_CYC 13
#define CSR_PCER_ST_EXT_CYC 14
#define CSR_PCER_TCDM_CONT 15
#ifndef PI_PERF_CYCLES
#define PI_PERF_CYCLES CSR_PCER_CYCLES
#endif
void pi_perf_conf(unsigned events);
void pi_perf_reset(void);
void pi_perf_start(void);
void pi_perf_stop(void);
unsigned int pi_perf_read(int event);
void pi_perf_cl_reset(void);
void pi_perf_cl_start(void);
void pi_perf_cl_stop(void);
unsigned int pi_perf_cl_read(int event);

/* A fault of the code under test: print it and stop (exit status 3). */
void ckpt_fault(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

void pmsis_exit(int status) __attribute__((noreturn));

#endif /* CKPT_HOST_PMSIS_H */
