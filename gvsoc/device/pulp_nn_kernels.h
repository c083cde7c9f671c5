/* ckpt's stand-in for PULP-NN's kernel header on the device. Deeploy's generated Siracusa code always includes
 * it; the fp32 training kernels call nothing from it (PULP-NN, Deeploy's integer kernel library, is a submodule
 * the kernels ckpt builds do not need). A call into it fails to link, naming the kernel. */
#ifndef CKPT_DEVICE_PULP_NN_KERNELS_H
#define CKPT_DEVICE_PULP_NN_KERNELS_H
#endif
