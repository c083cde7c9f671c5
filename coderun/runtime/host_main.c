/* ckpt's host harness for Deeploy's generated code: the part deeploytest.c plays on the device, minus the
 * comparison (ckpt compares the outputs it writes, by the same rule, in Python).
 *
 *   step OUTPUTS STATS [STEPS]
 *
 * InitNetwork runs once (it loads constants and, for inputs the code keeps in L3, the input files); then each
 * step copies the graph inputs in (step 1: only those outside L3, as deeploytest.c does; later steps all of
 * them, since the step's arena reuses their space), runs RunNetwork on the master core and appends every
 * graph output's bytes to OUTPUTS. Input i is read from the file input_<i>.bin in $CKPT_HOST_FILES. STATS gets
 * a JSON object: the output sizes and what the code allocated and moved.
 */
#include "Network.h"
#include "dory_mem.h"
#include "host_runtime.h"
#include "pmsis.h"

static void copy_inputs(int step) {
  for (uint32_t i = 0; i < DeeployNetwork_num_inputs; i++) {
    void *buf = DeeployNetwork_inputs[i];
    if (step == 1 && ckpt_is_l3(buf))
      continue;
    char name[64];
    size_t size;
    snprintf(name, sizeof name, "input_%u.bin", i);
    char *data = ckpt_read_file(name, &size);
    if (size != DeeployNetwork_inputs_bytes[i])
      ckpt_fault("%s holds %zu bytes; the code's input %u has %u", name, size, i, DeeployNetwork_inputs_bytes[i]);
    if (ckpt_is_l3(buf))
      ram_write(buf, data, size);
    else
      memcpy(buf, data, size);
    free(data);
  }
}

static void write_outputs(FILE *out) {
  for (uint32_t o = 0; o < DeeployNetwork_num_outputs; o++) {
    uint32_t size = DeeployNetwork_outputs_bytes[o];
    const void *bytes = DeeployNetwork_outputs[o];
    if (ckpt_is_l3(bytes))
      bytes = ckpt_l3_bytes(bytes, size, "reading an output");
    if (fwrite(bytes, 1, size, out) != size)
      ckpt_fault("cannot write output %u", o);
  }
}

static void write_stats(const char *path, int steps) {
  FILE *f = fopen(path, "w");
  if (!f)
    ckpt_fault("cannot write %s", path);
  fprintf(f, "{\"steps\": %d, \"cores\": %d, \"output_bytes\": [", steps, NUM_CORES);
  for (uint32_t o = 0; o < DeeployNetwork_num_outputs; o++)
    fprintf(f, "%s%u", o ? ", " : "", DeeployNetwork_outputs_bytes[o]);
  fprintf(f, "], \"input_bytes\": [");
  for (uint32_t i = 0; i < DeeployNetwork_num_inputs; i++)
    fprintf(f, "%s%u", i ? ", " : "", DeeployNetwork_inputs_bytes[i]);
  fprintf(f, "], ");
  ckpt_write_tallies(f);
  fprintf(f, "}\n");
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s OUTPUTS STATS [STEPS]\n", argv[0]);
    return 2;
  }
  int steps = argc == 4 ? atoi(argv[3]) : 1;
  if (steps < 1)
    ckpt_fault("STEPS must be at least 1, not %s", argv[3]);
  FILE *out = fopen(argv[1], "wb");
  if (!out)
    ckpt_fault("cannot write %s", argv[1]);
  mem_init();
  open_fs();
  InitNetwork(0, 1);
  for (int step = 1; step <= steps; step++) {
    copy_inputs(step);
    RunNetwork(0, 1);
    write_outputs(out);
  }
  if (fclose(out) != 0)
    ckpt_fault("cannot write %s", argv[1]);
  write_stats(argv[2], steps);
  return 0;
}
