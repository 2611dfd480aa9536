/* SPDX-License-Identifier: MIT */
/* Which build of the functions a translation unit compiles (docs/numerics-elementary.md §7.1).
 *
 * On x86-64 with GCC or clang every function is built twice: fma_build.c includes the function
 * files with PD_LIBM_FMA_BUILD defined (each fma one instruction, names pd_libm_fma_*, the only
 * FMA code allowed in the core), and the files compiled on their own give the emulated build
 * (pd_libm_emu_*, §7.2). Elsewhere there is one build calling C99 fma() (pd_libm_c99_*).
 * FMA(a, b, c) is the document's fma(a, b, c); every other operation is rounded on its own. */
#ifndef PD_LIBM_VARIANT_H
#define PD_LIBM_VARIANT_H
#include <math.h>
#include <stdint.h>
#include "../platform/pd_platform.h"
#include "bits.h"
#include "fma_soft.h"

#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
#define PD_LIBM_TWO_BUILDS 1
#else
#define PD_LIBM_TWO_BUILDS 0
#endif

#if defined(PD_LIBM_FMA_BUILD)
#define PD_V(name) pd_libm_fma_##name
#define PD_VATTR PD_TARGET("fma")
#define FMA(a, b, c) __builtin_fma((a), (b), (c))
#elif PD_LIBM_TWO_BUILDS
#define PD_V(name) pd_libm_emu_##name
#define PD_VATTR
#define FMA(a, b, c) pd_fma_inline((a), (b), (c))
#else
#define PD_V(name) pd_libm_c99_##name
#define PD_VATTR
#define FMA(a, b, c) fma((a), (b), (c))
#endif

/* Step helpers: always inlined into their caller (named by PD_V should one stay a call). */
#if defined(__GNUC__) || defined(__clang__)
#define PD_STEP static inline __attribute__((always_inline)) PD_VATTR
#else
#define PD_STEP static __forceinline
#endif
#endif
