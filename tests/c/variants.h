/* SPDX-License-Identifier: MIT */
/* The product paths the checks run, the AVX-512 one once per spelling of its tiles' products
 * (kernels/mul_bcast_avx512.h: separate broadcasts, or folded into the multiplies). */
#ifndef PD_TEST_VARIANTS_H
#define PD_TEST_VARIANTS_H
#include <stddef.h>
#include "kernels/gemm.h"

typedef struct {
    const char *name, *path;
    int fold; /* pd_force_avx512_fold's mode: -1 leaves the CPU's choice */
} pd_variant;

static const pd_variant pd_variants[] = {{"baseline", "baseline", -1}, {"avx2", "avx2", -1},
                                         {"avx512", "avx512", 0},      {"avx512-folded", "avx512", 1},
                                         {"neon", "neon", -1}};
#define PD_VARIANT_COUNT (sizeof pd_variants / sizeof pd_variants[0])

/* Forces variant v; 0 when its path is not on this CPU or architecture. */
static inline int pd_force_variant(size_t v) {
    pd_force_avx512_fold(pd_variants[v].fold);
    return pd_force_kernel_path(pd_variants[v].path);
}

#endif
