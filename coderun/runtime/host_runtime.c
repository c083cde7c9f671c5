/* ckpt's host implementation of the runtime calls Deeploy's generated Siracusa and GAP9 code makes (pmsis.h says
 * model of the device it implements), and of Deeploy's dory_mem.h interface (RAM and file loads).
 *
 * Every check here stops the run with a one-line fault on stderr and exit status 3, so a layout or transfer
 * the device would get wrong is a failed run, never a quietly wrong number.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <unistd.h>

#include "DeeployMchan.h"
#include "dory_mem.h"
#include "host_runtime.h"
#include "pmsis.h"

#ifndef CKPT_L3_BYTES
#define CKPT_L3_BYTES (64u * 1024u * 1024u)
#endif

#define FAULT_STATUS 3

void ckpt_fault(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  fputs("ckpt-host: fault: ", stderr);
  vfprintf(stderr, fmt, args);
  fputc('\n', stderr);
  va_end(args);
  fflush(stdout);
  _exit(FAULT_STATUS);
}

void pmsis_exit(int status) {
  fflush(stdout);
  fflush(stderr);
  _exit(status);
}

/* ------------------------------------------------------------------ the cluster team: cores as threads */

static pthread_t team[NUM_CORES];
static pthread_barrier_t fork_start, fork_end, team_barrier;
static void (*fork_entry)(void *);
static void *fork_arg;
static int team_up, forking;
static __thread int this_core;

static void *core_main(void *id) {
  this_core = (int)(intptr_t)id;
  for (;;) {
    pthread_barrier_wait(&fork_start);
    fork_entry(fork_arg);
    pthread_barrier_wait(&fork_end);
  }
  return NULL;
}

static void start_team(void) {
  pthread_barrier_init(&fork_start, NULL, NUM_CORES);
  pthread_barrier_init(&fork_end, NULL, NUM_CORES);
  pthread_barrier_init(&team_barrier, NULL, NUM_CORES);
  for (intptr_t core = 1; core < NUM_CORES; core++) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8u << 20);
    if (pthread_create(&team[core], &attr, core_main, (void *)core) != 0)
      ckpt_fault("cannot start cluster core %ld as a thread", (long)core);
    pthread_attr_destroy(&attr);
  }
  team_up = 1;
}

int pi_core_id(void) { return this_core; }
int pi_cluster_id(void) { return 0; }
int pi_cl_cluster_nb_cores(void) { return NUM_CORES; }
int pi_cl_team_nb_cores(void) { return forking ? NUM_CORES : 1; }

void pi_cl_team_fork(int nb_cores, void (*entry)(void *), void *arg) {
  if (nb_cores != 0 && nb_cores != NUM_CORES)
    ckpt_fault("pi_cl_team_fork on %d cores: the code was built for a team of %d", nb_cores, NUM_CORES);
  if (forking || this_core != 0)
    ckpt_fault("pi_cl_team_fork inside a fork (core %d)", this_core);
  if (!team_up)
    start_team();
  fork_entry = entry;
  fork_arg = arg;
  forking = 1;
  ckpt_counters.forks++;
  pthread_barrier_wait(&fork_start);
  entry(arg);
  pthread_barrier_wait(&fork_end);
  forking = 0;
}

void pi_cl_team_barrier(void) {
  if (forking)
    pthread_barrier_wait(&team_barrier);
}

/* ------------------------------------------------------------------ the cluster as the fabric controller sees it */

void pi_cluster_conf_init(struct pi_cluster_conf *conf) { conf->id = 0; }
void pi_open_from_conf(struct pi_device *device, void *conf) { device->data = conf; }
int pi_cluster_open(struct pi_device *device) {
  (void)device;
  return 0;
}
int pi_cluster_close(struct pi_device *device) {
  (void)device;
  return 0;
}

struct pi_cluster_task *pi_cluster_task(struct pi_cluster_task *task, void (*entry)(void *), void *arg) {
  task->entry = entry;
  task->arg = arg;
  task->stack_size = task->slave_stack_size = 0;
  return task;
}

__attribute__((weak)) void ckpt_after_task(void (*entry)(void *)) { (void)entry; }

int pi_cluster_send_task_to_cl(struct pi_device *device, struct pi_cluster_task *task) {
  (void)device;
  if (forking || this_core != 0)
    ckpt_fault("a cluster task sent from inside a fork (core %d)", this_core);
  task->entry(task->arg);
  ckpt_after_task(task->entry);
  return 0;
}

void pi_perf_conf(unsigned events) { (void)events; }
void pi_perf_reset(void) {}
void pi_perf_start(void) {}
void pi_perf_stop(void) {}
unsigned int pi_perf_read(int event) {
  (void)event;
  return 0;
}
void pi_perf_cl_reset(void) {}
void pi_perf_cl_start(void) {}
void pi_perf_cl_stop(void) {}
unsigned int pi_perf_cl_read(int event) {
  (void)event;
  return 0;
}

/* ------------------------------------------------------------------ allocations, per memory level */

ckpt_counters_t ckpt_counters;

void ckpt_write_tallies(FILE *f) {
  fprintf(f, "\"levels\": {");
  for (int l = 0; l < 3; l++) {
    ckpt_level_t *v = &ckpt_counters.level[l];
    fprintf(f, "%s\"L%d\": {\"peak\": %ld, \"end\": %ld, \"allocated\": %llu}", l ? ", " : "", l + 1, v->peak,
            v->current, (unsigned long long)v->allocated);
  }
  fprintf(f, "}, \"forks\": %llu, \"dma_transfers\": %llu, \"dma_bytes\": %llu, \"ram_copies\": %llu, "
             "\"ram_bytes\": %llu",
          (unsigned long long)ckpt_counters.forks, (unsigned long long)ckpt_counters.dma_transfers,
          (unsigned long long)ckpt_counters.dma_bytes, (unsigned long long)ckpt_counters.ram_copies,
          (unsigned long long)ckpt_counters.ram_bytes);
}

typedef struct {
  char *base;
  size_t size;
  int level; /* 1, 2 or 3 */
  int live;
} block_t;

static block_t *blocks;
static size_t n_blocks, cap_blocks;
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *level_name(int level) { return level == 1 ? "L1" : level == 2 ? "L2" : "L3"; }

static void tally(int level, long delta) {
  ckpt_level_t *l = &ckpt_counters.level[level - 1];
  l->current += delta;
  if (delta > 0)
    l->allocated += (uint64_t)delta;
  if (l->current > l->peak)
    l->peak = l->current;
}

static void remember(char *base, size_t size, int level) {
  pthread_mutex_lock(&blocks_lock);
  if (n_blocks == cap_blocks) {
    cap_blocks = cap_blocks ? 2 * cap_blocks : 256;
    blocks = realloc(blocks, cap_blocks * sizeof *blocks);
    if (!blocks)
      ckpt_fault("out of host memory for the allocation table");
  }
  blocks[n_blocks++] = (block_t){base, size, level, 1};
  tally(level, (long)size);
  pthread_mutex_unlock(&blocks_lock);
}

/* The live block holding [p, p + n), or NULL. */
static block_t *block_of(const char *p, size_t n) {
  block_t *found = NULL;
  pthread_mutex_lock(&blocks_lock);
  for (size_t i = n_blocks; i-- > 0;) {
    block_t *b = &blocks[i];
    if (b->live && p >= b->base && p + n <= b->base + b->size) {
      found = b;
      break;
    }
  }
  pthread_mutex_unlock(&blocks_lock);
  return found;
}

static void forget(char *base, size_t size, int level, const char *call) {
  block_t *b = block_of(base, 0);
  if (!b || b->base != base || b->level != level)
    ckpt_fault("%s(%p, %zu): not a live %s block", call, (void *)base, size, level_name(level));
  if (b->size != size)
    ckpt_fault("%s of a %zu-byte %s block with size %zu", call, b->size, level_name(level), size);
  b->live = 0;
  tally(level, -(long)size);
}

/* L1 and L2 are one region of this host's address space, mapped where the low 32 bits of every address are at
 * least 0x10000000 (where Siracusa's L1 begins) and L3 one where they are below it: a harness that tells on-chip
 * pointers from L3 ones by their 32-bit value (deeploytraintest.c: `(uint32_t)p >= 0x10000000`) tells them apart
 * here as on the device. Local blocks are handed out in address order and never reused; the region is sparse
 * (only the bytes touched take host memory, and a freed block's pages are given back), so every block starts
 * zero-filled: the device's memory holds whatever was there, a run must not depend on it, and zeroes make two
 * runs of the same code comparable bit for bit. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#endif
#define REDZONE 64u /* bytes after each local block no code may touch (poisoned in AddressSanitizer builds) */
#define ON_CHIP_LOW 0x10000000ull
#define LOCAL_SPAN ((size_t)0xE0000000ull)
#define REGION_HINT 0x560000000000ull /* the first 4 GiB-aligned address tried (where the sanitizers let a program map) */
static char *local_base;
static size_t local_end;

/* A mapping of `span` bytes at an address whose low 32 bits are `low`, or a fault. */
static char *map_at_low(uint64_t low, size_t span, int prot, int flags, int fd) {
  for (uint64_t k = 0; k < 256; k++) {
    char *want = (char *)(uintptr_t)(REGION_HINT + (k << 32) + low);
    char *got = mmap(want, span, prot, flags | MAP_FIXED_NOREPLACE, fd, 0);
    if (got == want)
      return got;
    if (got != MAP_FAILED)
      munmap(got, span);
  }
  ckpt_fault("cannot map %zu bytes at an address ending in 0x%08llx (%s)", span, (unsigned long long)low,
             strerror(errno));
}

static void *local_alloc(uint32_t size, int level) {
  pthread_mutex_lock(&blocks_lock);
  if (!local_base)
    local_base = map_at_low(ON_CHIP_LOW, LOCAL_SPAN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                            -1);
  size_t start = local_end;
  local_end = ((start + (size ? size : 1) + 63) & ~(size_t)63) + REDZONE;
  pthread_mutex_unlock(&blocks_lock);
  if (local_end > LOCAL_SPAN)
    ckpt_fault("cannot allocate %u bytes of %s: the host's on-chip region is used up", size, level_name(level));
  POISON(local_base + start + size, local_end - start - size);
  remember(local_base + start, size, level);
  return local_base + start;
}

static void local_free(void *ptr, uint32_t size, int level, const char *call) {
  forget(ptr, size, level, call);
  POISON(ptr, size);
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t first = ((uintptr_t)ptr + page - 1) & ~(page - 1), last = ((uintptr_t)ptr + size) & ~(page - 1);
  if (last > first)
    madvise((void *)first, last - first, MADV_DONTNEED);
}

void *pmsis_l1_malloc(uint32_t size) { return local_alloc(size, 1); }
void pmsis_l1_malloc_free(void *ptr, uint32_t size) { local_free(ptr, size, 1, "pmsis_l1_malloc_free"); }
void *pi_l1_malloc(void *device, uint32_t size) {
  (void)device;
  return local_alloc(size, 1);
}
void pi_l1_free(void *device, void *ptr, uint32_t size) {
  (void)device;
  local_free(ptr, size, 1, "pi_l1_free");
}
void *pi_l2_malloc(uint32_t size) { return local_alloc(size, 2); }
void pi_l2_free(void *ptr, uint32_t size) { local_free(ptr, size, 2, "pi_l2_free"); }

/* ------------------------------------------------------------------ L3: a separate address space */

/* The same memory mapped twice: `l3_device` is what the code's pointers point into (no access, so a core
 * touching L3 directly faults), `l3_data` is where the RAM copies read and write. Allocations are placed
 * L3_GUARD bytes apart, so a copy running past the end of one lands in a gap and faults instead of reaching
 * the next; the L3 size is checked against the bytes allocated, gaps not counted. The mapping is sparse: only
 * the bytes written take host memory. */
#define L3_GUARD (16u * 1024u)
#define L3_SPAN ((size_t)CKPT_L3_BYTES + ((size_t)4096u * L3_GUARD))
static char *l3_device, *l3_data;
static size_t l3_end, l3_allocated;

static void l3_open(void) {
  if (l3_device)
    return;
  int fd = memfd_create("ckpt-l3", 0);
  if (fd < 0 || ftruncate(fd, (off_t)L3_SPAN) != 0)
    ckpt_fault("cannot create the L3 memory (%s)", strerror(errno));
  if (L3_SPAN >= ON_CHIP_LOW)
    ckpt_fault("an L3 of %u bytes does not fit below the on-chip addresses here", (unsigned)CKPT_L3_BYTES);
  l3_device = map_at_low(0, L3_SPAN, PROT_NONE, MAP_SHARED, fd);
  l3_data = mmap(NULL, L3_SPAN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (l3_device == MAP_FAILED || l3_data == MAP_FAILED)
    ckpt_fault("cannot map the L3 memory (%s)", strerror(errno));
  close(fd);
}

int ckpt_is_l3(const void *p) {
  return l3_device && (const char *)p >= l3_device && (const char *)p < l3_device + L3_SPAN;
}

/* Where the bytes [p, p + n) of L3 live on this host; they must lie in one live L3 allocation. */
void *ckpt_l3_bytes(const void *p, size_t n, const char *what) {
  if (!ckpt_is_l3(p))
    ckpt_fault("%s: %p is not an L3 address", what, p);
  block_t *b = block_of((const char *)p, n);
  if (!b || b->level != 3)
    ckpt_fault("%s: %zu bytes at L3+%ld leave every L3 allocation", what, n, (long)((const char *)p - l3_device));
  return l3_data + ((const char *)p - l3_device);
}

/* The program's own image (its static arrays: constants Deeploy placed in L1/L2 are C globals). */
extern char __executable_start[], _end[];

/* A local (L1/L2) range the DMA or a RAM copy touches must lie in one live local allocation, or in the
 * program's static data. */
static void check_local(const void *p, size_t n, const char *what) {
  const char *c = (const char *)p;
  if (ckpt_is_l3(p))
    ckpt_fault("%s: the local side %p is an L3 address", what, p);
  if (c >= __executable_start && c + n <= _end)
    return;
  block_t *b = block_of(c, n);
  if (!b)
    ckpt_fault("%s: %zu bytes at %p leave every L1/L2 allocation", what, n, p);
}

static void *l3_alloc(size_t size) {
  l3_open();
  size_t start = l3_end + L3_GUARD;
  if (l3_allocated + size > CKPT_L3_BYTES || start + size > L3_SPAN)
    ckpt_fault("L3 is full: %zu bytes asked with %zu of %u allocated", size, l3_allocated, (unsigned)CKPT_L3_BYTES);
  l3_end = (start + size + 63) & ~(size_t)63;
  l3_allocated += size;
  remember(l3_device + start, size, 3);
  return l3_device + start;
}

void mem_init(void) { l3_open(); }
void open_fs(void) {}

static struct pi_device ram_device;
struct pi_device ram;
struct pi_device *get_ram_ptr(void) { return &ram_device; }

void *ram_malloc(size_t size) { return l3_alloc(size); }
void *cl_ram_malloc(size_t size) { return l3_alloc(size); }
void ram_free(void *ptr, size_t size) { forget(ptr, size, 3, "ram_free"); }
void cl_ram_free(void *ptr, size_t size) { forget(ptr, size, 3, "cl_ram_free"); }

void ram_read(void *dest, void *src, size_t size) { memcpy(dest, ckpt_l3_bytes(src, size, "ram_read"), size); }
void ram_write(void *dest, void *src, size_t size) { memcpy(ckpt_l3_bytes(dest, size, "ram_write"), src, size); }
void cl_ram_read(void *dest, void *src, size_t size) { ram_read(dest, src, size); }
void cl_ram_write(void *dest, void *src, size_t size) { ram_write(dest, src, size); }

void pi_cl_ram_copy_2d(struct pi_device *device, void *ram_addr, void *addr, uint32_t size, uint32_t stride,
                       uint32_t length, int ext2loc, pi_cl_ram_req_t *req) {
  (void)device;
  if (length == 0)
    ckpt_fault("pi_cl_ram_copy_2d with lines of 0 bytes");
  uint32_t lines = (size + length - 1) / length;
  /* Lines closer than their length overlap in RAM: a read of them is defined (the same bytes read again), a
   * write is not. One line has no stride to speak of. */
  if (lines > 1 && stride < length && !ext2loc)
    ckpt_fault("pi_cl_ram_copy_2d writing lines of %u bytes %u apart (they overlap)", length, stride);
  check_local(addr, size, "pi_cl_ram_copy_2d");
  ckpt_l3_bytes(ram_addr, (size_t)(lines - 1) * stride + (size - (lines - 1) * length), "pi_cl_ram_copy_2d");
  for (uint32_t line = 0; line < lines; line++) {
    uint32_t n = MIN_U32(length, size - line * length);
    char *ext = ckpt_l3_bytes((char *)ram_addr + (size_t)line * stride, n, "pi_cl_ram_copy_2d");
    char *loc = (char *)addr + (size_t)line * length;
    if (ext2loc)
      memcpy(loc, ext, n);
    else
      memcpy(ext, loc, n);
  }
  ckpt_counters.ram_copies++;
  ckpt_counters.ram_bytes += size;
  req->size = size;
  req->done = 1;
}

void pi_cl_ram_copy(struct pi_device *device, void *ram_addr, void *addr, uint32_t size, int ext2loc,
                    pi_cl_ram_req_t *req) {
  pi_cl_ram_copy_2d(device, ram_addr, addr, size, size ? size : 1, size ? size : 1, ext2loc, req);
}

void pi_cl_ram_read(struct pi_device *device, void *ram_addr, void *addr, uint32_t size, pi_cl_ram_req_t *req) {
  pi_cl_ram_copy(device, ram_addr, addr, size, 1, req);
}

void pi_cl_ram_write(struct pi_device *device, void *ram_addr, void *addr, uint32_t size, pi_cl_ram_req_t *req) {
  pi_cl_ram_copy(device, ram_addr, addr, size, 0, req);
}

void pi_cl_ram_copy_wait(pi_cl_ram_req_t *req) {
  if (!req->done)
    ckpt_fault("pi_cl_ram_copy_wait on a request no copy started");
}
void pi_cl_ram_read_wait(pi_cl_ram_req_t *req) { pi_cl_ram_copy_wait(req); }
void pi_cl_ram_write_wait(pi_cl_ram_req_t *req) { pi_cl_ram_copy_wait(req); }

/* ------------------------------------------------------------------ the cluster DMA (mchan v7) */

#define MCHAN_LEN_MASK ((1u << 17) - 1)
#define MCHAN_EXT2LOC (1u << 17)
#define MCHAN_2D_EXT (1u << 19)
#define MCHAN_2D_LOC (1u << 23)

static uint32_t channels_in_use;

uint32_t ckpt_mchan_channel_alloc(void) {
  for (uint32_t c = 0; c < 16; c++)
    if (!(channels_in_use & (1u << c))) {
      channels_in_use |= 1u << c;
      return c;
    }
  ckpt_fault("mchan: all 16 DMA channels are allocated (the code does not free them)");
}

void ckpt_mchan_channel_free(uint32_t channel) {
  if (channel > 15 || !(channels_in_use & (1u << channel)))
    ckpt_fault("mchan: free of channel %u, which is not allocated", channel);
  channels_in_use &= ~(1u << channel);
}

int ckpt_mchan_channel_busy(uint32_t channel) {
  if (channel > 15 || !(channels_in_use & (1u << channel)))
    ckpt_fault("mchan: wait on channel %u, which is not allocated", channel);
  return 0; /* transfers complete when issued */
}

/* One side of a transfer as lines: `count` lines of `line` bytes, `stride` apart. */
static void dma_side(uint32_t len, uint32_t size_1d, uint32_t stride_2d, int strided, uint32_t *line,
                     uint32_t *stride) {
  *line = strided ? size_1d : len;
  *stride = strided ? stride_2d : len;
  if (*line == 0)
    ckpt_fault("mchan: a 2-D transfer with 1-D size 0");
}

void ckpt_mchan_transfer(uint32_t cmd, void *loc, void *ext, uint32_t ext_size_1d, uint32_t ext_stride_2d,
                         uint32_t loc_size_1d, uint32_t loc_stride_2d) {
  uint32_t len = cmd & MCHAN_LEN_MASK;
  int ext2loc = (cmd & MCHAN_EXT2LOC) != 0;
  uint32_t ext_line, ext_stride, loc_line, loc_stride;
  dma_side(len, ext_size_1d, ext_stride_2d, (cmd & MCHAN_2D_EXT) != 0, &ext_line, &ext_stride);
  dma_side(len, loc_size_1d, loc_stride_2d, (cmd & MCHAN_2D_LOC) != 0, &loc_line, &loc_stride);
  if ((ext_size_1d && !(cmd & MCHAN_2D_EXT)) || (loc_size_1d && !(cmd & MCHAN_2D_LOC)))
    ckpt_fault("mchan: 2-D arguments given without the 2-D flag in command 0x%x", cmd);
  if (ckpt_is_l3(loc) || ckpt_is_l3(ext))
    ckpt_fault("mchan: a cluster DMA transfer touches L3 (command 0x%x)", cmd);
  /* Walk both sides byte run by byte run; each run stays inside one line of each side. */
  uint32_t done = 0;
  while (done < len) {
    uint32_t e_off = (done / ext_line) * ext_stride + done % ext_line;
    uint32_t l_off = (done / loc_line) * loc_stride + done % loc_line;
    uint32_t n = MIN_U32(ext_line - done % ext_line, loc_line - done % loc_line);
    n = MIN_U32(n, len - done);
    char *e = (char *)ext + e_off, *l = (char *)loc + l_off;
    check_local(e, n, "mchan (external side)");
    check_local(l, n, "mchan (local side)");
    if (ext2loc)
      memmove(l, e, n);
    else
      memmove(e, l, n);
    done += n;
  }
  ckpt_counters.dma_transfers++;
  ckpt_counters.dma_bytes += len;
}

/* GAP9's DMA (DeeployMchan.h): the transfer record its code fills, checked against what its command word can say. */
void ckpt_gap9_mchan_push(const mchan_transfer_t *transfer, int two_d) {
  uint32_t cmd = (uint32_t)transfer->cmd;
  if (transfer->size < 0 || (uint32_t)transfer->size > MCHAN_LEN_MASK || (cmd & MCHAN_LEN_MASK) != (uint32_t)transfer->size)
    ckpt_fault("mchan (GAP9): a transfer of %d B between %p and %p does not fit its command 0x%x, whose 17-bit "
               "length says %u B (GAP9's DMA takes at most %u B at once)", transfer->size, transfer->loc,
               transfer->ext, cmd, cmd & MCHAN_LEN_MASK, MCHAN_LEN_MASK);
  if (two_d != ((cmd & MCHAN_2D_EXT) != 0))
    ckpt_fault("mchan (GAP9): a %s push of command 0x%x, whose 2-D flag says otherwise", two_d ? "2-D" : "1-D", cmd);
  ckpt_mchan_transfer(cmd, transfer->loc, transfer->ext, two_d ? (uint32_t)transfer->ext_size_1d : 0,
                      two_d ? (uint32_t)transfer->ext_stride_1d : 0, 0, 0);
}

void pi_cl_dma_memcpy(pi_cl_dma_copy_t *copy) {
  (void)copy;
  ckpt_fault("pi_cl_dma_memcpy: PMSIS's cluster DMA is not modelled here (Deeploy's kernels use mchan)");
}
void pi_cl_dma_memcpy_2d(pi_cl_dma_copy_2d_t *copy) {
  (void)copy;
  ckpt_fault("pi_cl_dma_memcpy_2d: PMSIS's cluster DMA is not modelled here (Deeploy's kernels use mchan)");
}
void pi_cl_dma_wait(void *copy) {
  (void)copy;
  ckpt_fault("pi_cl_dma_wait: PMSIS's cluster DMA is not modelled here (Deeploy's kernels use mchan)");
}

/* ------------------------------------------------------------------ files (the device's flash file system) */

static const char *file_dirs(void) {
  const char *dirs = getenv("CKPT_HOST_FILES");
  return dirs && *dirs ? dirs : ".";
}

/* Read the named file from the first folder of $CKPT_HOST_FILES (colon-separated) that has it. */
char *ckpt_read_file(const char *filename, size_t *size) {
  const char *dirs = file_dirs();
  char path[4096];
  while (*dirs) {
    const char *end = strchr(dirs, ':');
    size_t n = end ? (size_t)(end - dirs) : strlen(dirs);
    snprintf(path, sizeof path, "%.*s/%s", (int)n, dirs, filename);
    FILE *f = fopen(path, "rb");
    if (f) {
      fseek(f, 0, SEEK_END);
      long len = ftell(f);
      fseek(f, 0, SEEK_SET);
      char *data = malloc(len > 0 ? (size_t)len : 1);
      if (!data || fread(data, 1, (size_t)len, f) != (size_t)len)
        ckpt_fault("cannot read %s", path);
      fclose(f);
      *size = (size_t)len;
      return data;
    }
    dirs += n + (end ? 1 : 0);
  }
  ckpt_fault("the code loads file %s, which none of %s holds", filename, file_dirs());
}

size_t load_file_to_ram(const void *dest, const char *filename) {
  size_t size;
  char *data = ckpt_read_file(filename, &size);
  memcpy(ckpt_l3_bytes(dest, size, filename), data, size);
  free(data);
  return size;
}

size_t load_file_to_local(const void *dest, const char *filename) {
  size_t size;
  char *data = ckpt_read_file(filename, &size);
  check_local(dest, size, filename);
  memcpy((void *)dest, data, size);
  free(data);
  return size;
}
