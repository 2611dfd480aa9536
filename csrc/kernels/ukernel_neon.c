/* SPDX-License-Identifier: MIT */
/* NEON (Advanced SIMD) 6x8 micro-kernel for aarch64: 24 two-lane accumulators, each lane one
 * output of C. Multiply and add stay separate instructions (vmulq then vaddq, never vfmaq). */
#include "../platform/pd_platform.h"
#if PD_ARCH_AARCH64
#include <arm_neon.h>
#include "ukernel.h"
#include "gemm_small.h"

#define MR 6
#define NR 8

#define ROW(i, ai)                                                              \
    do {                                                                        \
        c##i##0 = vaddq_f64(c##i##0, vmulq_f64(ai, b0));                        \
        c##i##1 = vaddq_f64(c##i##1, vmulq_f64(ai, b1));                        \
        c##i##2 = vaddq_f64(c##i##2, vmulq_f64(ai, b2));                        \
        c##i##3 = vaddq_f64(c##i##3, vmulq_f64(ai, b3));                        \
    } while (0)

#define LOAD(i)                                                                            \
    float64x2_t c##i##0 = load ? vld1q_f64(c + (i) * ldc) : vdupq_n_f64(0.0);              \
    float64x2_t c##i##1 = load ? vld1q_f64(c + (i) * ldc + 2) : vdupq_n_f64(0.0);          \
    float64x2_t c##i##2 = load ? vld1q_f64(c + (i) * ldc + 4) : vdupq_n_f64(0.0);          \
    float64x2_t c##i##3 = load ? vld1q_f64(c + (i) * ldc + 6) : vdupq_n_f64(0.0)

#define STORE1(i, v)                                                                         \
    do {                                                                                     \
        if (add) c##i##v = vaddq_f64(vld1q_f64(add + (i) * ldadd + 2 * (v)), c##i##v);       \
        vst1q_f64(c + (i) * ldc + 2 * (v), c##i##v);                                         \
    } while (0)
#define STORE(i) STORE1(i, 0); STORE1(i, 1); STORE1(i, 2); STORE1(i, 3)

#define LOADS LOAD(0); LOAD(1); LOAD(2); LOAD(3); LOAD(4); LOAD(5)
#define STORES STORE(0); STORE(1); STORE(2); STORE(3); STORE(4); STORE(5)
#define LOAD_B                                                                                \
    const float64x2_t b0 = vld1q_f64(b), b1 = vld1q_f64(b + 2), b2 = vld1q_f64(b + 4),        \
                      b3 = vld1q_f64(b + 6)

static void ukernel_neon(size_t kc, const double *a, const double *b, double *c, size_t ldc,
                         const pd_tile_io *io) {
    PD_TILE_LOCALS(io, kc);
    LOADS;
    for (size_t k = 0; k < kc; pd_line_share_ask(&share)) {
        for (const size_t end = pd_line_share_until(&share, k, kc); k < end; k++, a += MR, b += NR) {
            LOAD_B;
            ROW(0, vld1q_dup_f64(a)); ROW(1, vld1q_dup_f64(a + 1)); ROW(2, vld1q_dup_f64(a + 2));
            ROW(3, vld1q_dup_f64(a + 3)); ROW(4, vld1q_dup_f64(a + 4)); ROW(5, vld1q_dup_f64(a + 5));
        }
    }
    STORES;
}

static void ukernel_neon_rows(size_t kc, const double *a, size_t lda, const double *b, double *c, size_t ldc,
                              const pd_tile_io *io) {
    PD_TILE_LOCALS(io, kc);
    const double *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    LOADS;
    for (size_t k = 0; k < kc; pd_line_share_ask(&share)) {
        for (const size_t end = pd_line_share_until(&share, k, kc); k < end; k++, b += NR) {
            LOAD_B;
            ROW(0, vld1q_dup_f64(a0 + k)); ROW(1, vld1q_dup_f64(a1 + k)); ROW(2, vld1q_dup_f64(a2 + k));
            ROW(3, vld1q_dup_f64(a3 + k)); ROW(4, vld1q_dup_f64(a4 + k)); ROW(5, vld1q_dup_f64(a5 + k));
        }
    }
    STORES;
}

/* Not measured on an aarch64 machine yet: the next tile's C and the next panel's lines just
 * before each tile, as before. */
const pd_gemm_path pd_path_neon = {"neon", MR, NR, 256, 96, 2048, 0, ukernel_neon, ukernel_neon_rows,
                                   pd_small_generic};
#else
typedef int pd_ukernel_neon_unused; /* not aarch64: this path does not exist */
#endif
