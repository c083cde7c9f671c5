/* ckpt's host stand-in for Deeploy's GAP9 DeeployGAP9Math.h (TargetLibraries/GAP9/inc), which the generated GAP9
 * code includes. GAP9 runs PULPOpen's kernels, but the branch's header declares none of them (only the basic
 * math, DORY's DMA and RAM headers and PMSIS), so a kernel called with float arguments would be implicitly
 * declared and handed doubles. This one keeps what the real one defines (the single-core macros as GAP9 writes
 * them: its cluster controller is core 8, or core 0) and declares the kernels: PULPOpen's math header and the
 * prototypes of every kernel function ckpt's kernel library compiled (kernel_prototypes.h, from gcc -aux-info of
 * their files). DORY's DMA header is left out: the generated code calls none of it (its DMA is DeeployMchan.h).
 */
#ifndef CKPT_HOST_DEEPLOY_GAP9_MATH_H
#define CKPT_HOST_DEEPLOY_GAP9_MATH_H

#include "pmsis.h"

#include "DeeployPULPMath.h"
#include "dory_mem.h"
#include "kernel_prototypes.h"

#undef BEGIN_SINGLE_CORE
#undef SINGLE_CORE
#define BEGIN_SINGLE_CORE if (pi_core_id() == 8 || pi_core_id() == 0) {
#define SINGLE_CORE if (pi_core_id() == 8 || pi_core_id() == 0)

#endif /* CKPT_HOST_DEEPLOY_GAP9_MATH_H */
