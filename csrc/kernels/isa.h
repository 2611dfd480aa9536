/* SPDX-License-Identifier: MIT */
/* The instruction set the products' path runs (gemm.c chooses it), for the other vector loops
 * that follow it: one choice, so forcing a path for tests moves every loop along. */
#ifndef PD_ISA_H
#define PD_ISA_H
#include "gemm.h"
#include "ukernel.h"
#include "../platform/pd_platform.h"

typedef enum { PD_ISA_BASELINE, PD_ISA_AVX2, PD_ISA_AVX512, PD_ISA_NEON } pd_isa;

static inline pd_isa pd_current_isa(void) {
    const char *path = pd_kernel_path(); /* the chosen path's own name: compared by address */
#if PD_ARCH_X86_64
    if (path == pd_path_avx512.name) return PD_ISA_AVX512;
    if (path == pd_path_avx2.name) return PD_ISA_AVX2;
#elif PD_ARCH_AARCH64
    if (path == pd_path_neon.name) return PD_ISA_NEON;
#endif
    (void)path;
    return PD_ISA_BASELINE;
}

/* The current path's variant of a loop, from its four spellings (only those of the build's
 * architecture need exist: the others are dropped unread). */
#if PD_ARCH_X86_64
#define PD_ISA_PICK(base, avx2, avx512, neon)                                                      \
    (pd_current_isa() == PD_ISA_AVX512 ? (avx512) : pd_current_isa() == PD_ISA_AVX2 ? (avx2) : (base))
#elif PD_ARCH_AARCH64
#define PD_ISA_PICK(base, avx2, avx512, neon) (pd_current_isa() == PD_ISA_NEON ? (neon) : (base))
#else
#define PD_ISA_PICK(base, avx2, avx512, neon) (base)
#endif

/* GCC keeps aarch64's baseline variant scalar (it would vectorize it with the NEON every
 * aarch64 has), so forcing the baseline path runs one-lane loops against NEON's; other
 * compilers have no per-function switch and vectorize both (the same bits either way). */
#if PD_ARCH_AARCH64 && defined(__GNUC__) && !defined(__clang__)
#define PD_ISA_SCALAR __attribute__((optimize("no-tree-vectorize")))
#else
#define PD_ISA_SCALAR
#endif

/* DEF(suffix, target) once per path: _baseline, on x86-64 _avx2 and _avx512 under their
 * targets, on aarch64 _neon (the same C, vectorized two lanes wide). */
#if PD_ARCH_X86_64
#define PD_ISA_VARIANTS(DEF) DEF(_baseline, ) DEF(_avx2, PD_TARGET("avx2")) DEF(_avx512, PD_TARGET("avx512f"))
#elif PD_ARCH_AARCH64
#define PD_ISA_VARIANTS(DEF) DEF(_baseline, PD_ISA_SCALAR) DEF(_neon, )
#else
#define PD_ISA_VARIANTS(DEF) DEF(_baseline, )
#endif
/* The current path's variant of a function defined through PD_ISA_VARIANTS. */
#define PD_ISA_CURRENT(stem) PD_ISA_PICK(stem##_baseline, stem##_avx2, stem##_avx512, stem##_neon)

#endif
