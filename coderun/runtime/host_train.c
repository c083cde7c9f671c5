/* ckpt's host side of Deeploy's training harness (deeploytraintest.c of its training branch, compiled as it is):
 * what the harness computed, written where ckpt reads it, as the harness itself prints only losses.
 *
 *  - after each task the harness sends the cluster that is the train network's step, every train-network output
 *    (as the harness sees it: DeeployNetwork_outputs[o]) is appended to $CKPT_TRAIN_OUTPUTS;
 *  - when the harness returns, every train-network input (data, weights, accumulated gradients, reset flag) goes to
 *    $CKPT_TRAIN_STATE and the runtime's tallies to $CKPT_STATS (a JSON object).
 */
#include "TrainingNetwork.h"
#include "host_runtime.h"
#include "pmsis.h"

static FILE *outputs;
static int steps;

static void append(FILE *f, const void *bytes, uint32_t size, const char *what) {
  if (ckpt_is_l3(bytes))
    bytes = ckpt_l3_bytes(bytes, size, what);
  if (fwrite(bytes, 1, size, f) != size)
    ckpt_fault("cannot write %s", what);
}

void ckpt_after_task(void (*entry)(void *)) {
  if (entry != (void (*)(void *))RunTrainingNetwork)
    return;
  steps++;
  for (uint32_t o = 0; o < DeeployNetwork_num_outputs; o++)
    append(outputs, DeeployNetwork_outputs[o], DeeployNetwork_outputs_bytes[o], "a train network output");
}

static FILE *open_named(const char *variable) {
  const char *path = getenv(variable);
  if (!path || !*path)
    ckpt_fault("$%s names no file", variable);
  FILE *f = fopen(path, "wb");
  if (!f)
    ckpt_fault("cannot write %s", path);
  return f;
}

static void finish(void) {
  if (fclose(outputs) != 0)
    ckpt_fault("cannot write $CKPT_TRAIN_OUTPUTS");
  FILE *state = open_named("CKPT_TRAIN_STATE");
  for (uint32_t i = 0; i < DeeployNetwork_num_inputs; i++)
    append(state, DeeployNetwork_inputs[i], DeeployNetwork_inputs_bytes[i], "a train network input");
  if (fclose(state) != 0)
    ckpt_fault("cannot write $CKPT_TRAIN_STATE");
  FILE *stats = open_named("CKPT_STATS");
  fprintf(stats, "{\"steps\": %d, \"cores\": %d, \"output_bytes\": [", steps, NUM_CORES);
  for (uint32_t o = 0; o < DeeployNetwork_num_outputs; o++)
    fprintf(stats, "%s%u", o ? ", " : "", DeeployNetwork_outputs_bytes[o]);
  fprintf(stats, "], \"input_bytes\": [");
  for (uint32_t i = 0; i < DeeployNetwork_num_inputs; i++)
    fprintf(stats, "%s%u", i ? ", " : "", DeeployNetwork_inputs_bytes[i]);
  fprintf(stats, "], ");
  ckpt_write_tallies(stats);
  fprintf(stats, "}\n");
  if (fclose(stats) != 0)
    ckpt_fault("cannot write $CKPT_STATS");
}

__attribute__((constructor)) static void start(void) {
  outputs = open_named("CKPT_TRAIN_OUTPUTS");
  atexit(finish);
}
