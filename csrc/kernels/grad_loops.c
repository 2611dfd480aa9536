/* SPDX-License-Identifier: MIT */
/* The gradient check and commit loops, one body compiled for each vector width. */
#include <string.h>
#include "grad_loops.h"
#include "isa.h"
#include "nonfinite.h"

#define COMMIT_DIRECT_LOOP                                                          \
    uint64_t any = 0;                                                               \
    for (size_t x = begin; x < end; x++) {                                          \
        const double v = 0.0 + g[x];                                                \
        g[x] = v;                                                                   \
        any |= pd_nonfinite_bit(v);                                                 \
    }                                                                               \
    return any
#define CHECK_SUM_LOOP                                                              \
    uint64_t any = 0;                                                               \
    for (size_t x = begin; x < end; x++)                                            \
        any |= pd_nonfinite_bit(c[x]) | pd_nonfinite_bit(g[x] + c[x]);              \
    return any
#define COMMIT_SUM_LOOP                                                             \
    for (size_t x = begin; x < end; x++) g[x] = g[x] + c[x]

#define GRAD_LOOPS(suffix, target)                                                                  \
    target static uint64_t commit_direct##suffix(double *g, size_t begin, size_t end) {   \
        COMMIT_DIRECT_LOOP;                                                                         \
    }                                                                                               \
    target static uint64_t check_sum##suffix(const double *g, const double *c,   \
                                             size_t begin, size_t end) {                            \
        CHECK_SUM_LOOP;                                                                             \
    }                                                                                               \
    target static void commit_sum##suffix(double *g, const double *c,            \
                                          size_t begin, size_t end) {                               \
        COMMIT_SUM_LOOP;                                                                            \
    }                                                                                               \
    static const pd_grad_loops loops##suffix = {commit_direct##suffix, check_sum##suffix,          \
                                                commit_sum##suffix};

PD_ISA_VARIANTS(GRAD_LOOPS)

const pd_grad_loops *pd_grad_loops_current(void) {
    return PD_ISA_PICK(&loops_baseline, &loops_avx2, &loops_avx512, &loops_neon);
}
