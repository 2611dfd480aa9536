/* SPDX-License-Identifier: MIT */
/* The FMA build of every function (docs/numerics-elementary.md §7.1): the function files once
 * more, each fma one instruction, every function named pd_libm_fma_*. x86-64 GCC/clang only. */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
#define PD_LIBM_FMA_BUILD 1
#include "exp.c"
#include "log.c"
#include "pow.c"
#include "log1p.c"
#include "sincos.c"
#else
typedef int pd_libm_fma_build_unused; /* one build elsewhere: the files on their own */
#endif
