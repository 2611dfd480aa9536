/* The instruction set the products' path runs (gemm.c chooses it), for the other vector loops
 * that follow it: one choice, so forcing a path for tests moves every loop along. */
#ifndef PD_ISA_H
#define PD_ISA_H
#include <string.h>
#include "gemm.h"

typedef enum { PD_ISA_BASELINE, PD_ISA_AVX2, PD_ISA_AVX512 } pd_isa;

static inline pd_isa pd_current_isa(void) {
    const char *path = pd_kernel_path();
    if (strcmp(path, "avx512") == 0) return PD_ISA_AVX512;
    if (strcmp(path, "avx2") == 0) return PD_ISA_AVX2;
    return PD_ISA_BASELINE;
}

#endif
