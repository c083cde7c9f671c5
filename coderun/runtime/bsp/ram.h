/* ckpt's host stand-in for the PULP BSP's RAM driver header: the RAM API the generated code calls is declared
 * in pmsis.h (host_runtime.c implements it). */
#ifndef CKPT_HOST_BSP_RAM_H
#define CKPT_HOST_BSP_RAM_H
#include "pmsis.h"
#endif
