/* ckpt's host stand-in for PULP-NN's kernel header. Deeploy's generated Siracusa code includes it always; the
 * fp32 training kernels call nothing from it (PULP-NN is Deeploy's integer kernel library, a submodule that is
 * not part of the kernels ckpt builds). A call into it fails to link, naming the kernel. */
#ifndef CKPT_HOST_PULP_NN_KERNELS_H
#define CKPT_HOST_PULP_NN_KERNELS_H
#include "pmsis.h"
#endif
