/* The instruction set the products' path runs (gemm.c chooses it), for the other vector loops
 * that follow it: one choice, so forcing a path for tests moves every loop along. */
#ifndef PD_ISA_H
#define PD_ISA_H
#include "gemm.h"
#include "ukernel.h"
#include "../platform/pd_platform.h"

typedef enum { PD_ISA_BASELINE, PD_ISA_AVX2, PD_ISA_AVX512 } pd_isa;

static inline pd_isa pd_current_isa(void) {
#if PD_ARCH_X86_64
    const char *path = pd_kernel_path(); /* the chosen path's own name: compared by address */
    if (path == pd_path_avx512.name) return PD_ISA_AVX512;
    if (path == pd_path_avx2.name) return PD_ISA_AVX2;
#endif
    return PD_ISA_BASELINE;
}

/* The current path's variant of a loop, from its three spellings (off x86-64 only `base` exists). */
#if PD_ARCH_X86_64
#define PD_ISA_PICK(base, avx2, avx512)                                                            \
    (pd_current_isa() == PD_ISA_AVX512 ? (avx512) : pd_current_isa() == PD_ISA_AVX2 ? (avx2) : (base))
#else
#define PD_ISA_PICK(base, avx2, avx512) (base)
#endif

/* DEF(suffix, target) once per path: _baseline, and on x86-64 _avx2 and _avx512 under their targets. */
#if PD_ARCH_X86_64
#define PD_ISA_VARIANTS(DEF) DEF(_baseline, ) DEF(_avx2, PD_TARGET("avx2")) DEF(_avx512, PD_TARGET("avx512f"))
#else
#define PD_ISA_VARIANTS(DEF) DEF(_baseline, )
#endif
/* The current path's variant of a function defined through PD_ISA_VARIANTS. */
#define PD_ISA_CURRENT(stem) PD_ISA_PICK(stem##_baseline, stem##_avx2, stem##_avx512)

#endif
