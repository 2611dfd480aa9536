/* SPDX-License-Identifier: MIT */
/* AVX-512F small products: tiles of 8 rows by one or two 8-wide column vectors, B rows read in
 * place (masked loads only at the right edge: a zero-masked load costs more than a plain one),
 * A broadcast in place, folded into each multiply or not as pd_avx512_folds() says
 * (mul_bcast_avx512.h). Multiply and add stay separate (the functions target avx512f,
 * contraction is off, so no FMA is emitted). */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#include "gemm.h"
#include "gemm_small.h"
#include "t8_avx512.h"
#include "mul_bcast_avx512.h"

#define R 8

/* Row r of the tile: missing rows (r >= rows) re-read row 0 and are never stored. */
#define ROWPTR(r) const double *a##r = A + ((r) < rows ? (size_t)(r) : 0) * rsa
#define ZERO(r, v) __m512d s##r##v = _mm512_setzero_pd()
#define STEP(r, v) s##r##v = _mm512_add_pd(s##r##v, PD_MUL512(fold, a##r + ka, b##v))
/* Column vector v of a B row or C row at x: whole when its mask is full. */
#define LD(v, x) (m##v == 0xFF ? _mm512_loadu_pd(x) : _mm512_maskz_loadu_pd(m##v, x))
#define OUT(r, v)                                                                                \
    do {                                                                                         \
        if ((r) < rows) {                                                                        \
            double *cr = c + (r) * ldc + 8 * (v);                                                \
            __m512d x = s##r##v;                                                                 \
            if (acc) x = _mm512_add_pd(LD(v, cr), x); /* C + s */                               \
            if (m##v == 0xFF) _mm512_storeu_pd(cr, x);                                           \
            else _mm512_mask_storeu_pd(cr, m##v, x);                                             \
        }                                                                                        \
    } while (0)
#define ALL(M, v) M(0, v); M(1, v); M(2, v); M(3, v); M(4, v); M(5, v); M(6, v); M(7, v)
#define ROWS(M) M(0); M(1); M(2); M(3); M(4); M(5); M(6); M(7)
/* The k loop, once with plain B loads for whole vectors and once with masked ones: a test of
 * the masks inside the loop costs the loop a few cycles per k. Two k per trip schedule better
 * on the short sums of small products (benchmarks/bench_small_gemm.c). */
#if defined(__GNUC__) || defined(__clang__)
#define UNROLL2 _Pragma("GCC unroll 2")
#else
#define UNROLL2
#endif
#define KLOOP(LOADS, STEPS)                                                                      \
    UNROLL2 for (size_t k = 0, ka = 0; k < K; k++, ka += csa, b += rsb) {                               \
        LOADS;                                                                                   \
        STEPS;                                                                                   \
    }

/* The sums of an 8-row tile of one column vector (mask m0), read by the tile stored as it is
 * and the tile stored transposed. */
#define SUMS_8X1                                                                                 \
    ROWS(ROWPTR);                                                                                \
    ALL(ZERO, 0);                                                                                \
    if (m0 == 0xFF) KLOOP(const __m512d b0 = _mm512_loadu_pd(b), ALL(STEP, 0))                   \
    else KLOOP(const __m512d b0 = _mm512_maskz_loadu_pd(m0, b), ALL(STEP, 0))

/* The tile of rows [i, i + rows) and the columns of mask m0 from j. Each tile body is
 * specialized below for both spellings of its products (fold) and stays out of line: inlined,
 * their row and mask cases grew the driver's frame and spills (benchmarks/KERNELS.md). */
PD_TARGET("avx512f") static PD_ALWAYS_INLINE void tile_8x1(const pd_product *p, size_t i, size_t j,
                                                           size_t rows, __mmask8 m0, const int fold) {
    const size_t K = p->K, rsa = p->rsa, csa = p->csa, rsb = p->rsb, ldc = p->ldc;
    const double *A = p->A + i * rsa, *b = p->B + j;
    double *c = p->C + i * ldc + j;
    const int acc = p->acc;
    SUMS_8X1;
    ALL(OUT, 0);
}

/* The sums of an 8-row tile of two column vectors (masks m0, m1), read by the tile stored
 * as it is and the tile stored transposed. */
#define SUMS_8X2                                                                                 \
    ROWS(ROWPTR);                                                                                \
    ALL(ZERO, 0);                                                                                \
    ALL(ZERO, 1);                                                                                \
    if ((m0 & m1) == 0xFF)                                                                       \
        KLOOP(const __m512d b0 = _mm512_loadu_pd(b); const __m512d b1 = _mm512_loadu_pd(b + 8),  \
              ALL(STEP, 0); ALL(STEP, 1))                                                        \
    else                                                                                         \
        KLOOP(const __m512d b0 = _mm512_maskz_loadu_pd(m0, b);                                   \
              const __m512d b1 = _mm512_maskz_loadu_pd(m1, b + 8), ALL(STEP, 0); ALL(STEP, 1))

/* The tile of rows [i, i + rows) and the columns of masks m0 from j and m1 from j + 8. */
PD_TARGET("avx512f") static PD_ALWAYS_INLINE void tile_8x2(const pd_product *p, size_t i, size_t j,
                                                           size_t rows, __mmask8 m0, __mmask8 m1, const int fold) {
    const size_t K = p->K, rsa = p->rsa, csa = p->csa, rsb = p->rsb, ldc = p->ldc;
    const double *A = p->A + i * rsa, *b = p->B + j;
    double *c = p->C + i * ldc + j;
    const int acc = p->acc;
    SUMS_8X2;
    ALL(OUT, 0);
    ALL(OUT, 1);
}

/* Column vector v of the tile stored transposed: the 8 rows' sums of lanes l become C row
 * j + 8v + l, columns i .. i + rows (masked), one register transpose per vector. */
#define OUT_T(v)                                                                                 \
    do {                                                                                         \
        const __m512d r[8] = {s0##v, s1##v, s2##v, s3##v, s4##v, s5##v, s6##v, s7##v};           \
        __m512d o[8];                                                                            \
        pd_t8_avx512(r, o);                                                                      \
        for (size_t l = 0; l < 8; l++)                                                           \
            if (m##v >> l & 1u) {                                                                \
                double *cr = c + (8 * (v) + l) * ldc;                                            \
                __m512d x = o[l];                                                                \
                if (acc) x = _mm512_add_pd(_mm512_maskz_loadu_pd(rm, cr), x); /* C + s */       \
                _mm512_mask_storeu_pd(cr, rm, x);                                                \
            }                                                                                    \
    } while (0)

/* tile_8x2 with the tile stored transposed: C(j + l, i + r) for the product's (i + r, j + l). */
PD_TARGET("avx512f") static PD_ALWAYS_INLINE void tile_8x2_t(const pd_product *p, size_t i, size_t j,
                                                             size_t rows, __mmask8 m0, __mmask8 m1,
                                                             const int fold) {
    const size_t K = p->K, rsa = p->rsa, csa = p->csa, rsb = p->rsb, ldc = p->ldc;
    const double *A = p->A + i * rsa, *b = p->B + j;
    double *c = p->C + j * ldc + i;
    const int acc = p->acc;
    const __mmask8 rm = (__mmask8)((1u << rows) - 1u);
    SUMS_8X2;
    OUT_T(0);
    if (m1) OUT_T(1);
}

/* tile_8x1 stored transposed: a block of 8 or fewer columns (the tied head's X Eᵀ over 8 or
 * fewer tokens, as at `tiny`) runs no second, empty column vector. */
PD_TARGET("avx512f") static PD_ALWAYS_INLINE void tile_8x1_t(const pd_product *p, size_t i, size_t j,
                                                             size_t rows, __mmask8 m0, const int fold) {
    const size_t K = p->K, rsa = p->rsa, csa = p->csa, rsb = p->rsb, ldc = p->ldc;
    const double *A = p->A + i * rsa, *b = p->B + j;
    double *c = p->C + j * ldc + i;
    const int acc = p->acc;
    const __mmask8 rm = (__mmask8)((1u << rows) - 1u);
    SUMS_8X1;
    OUT_T(0);
}

/* The four tiles for one spelling of their products, out of line. */
typedef void (*tile1_fn)(const pd_product *p, size_t i, size_t j, size_t rows, __mmask8 m0);
typedef void (*tile2_fn)(const pd_product *p, size_t i, size_t j, size_t rows, __mmask8 m0, __mmask8 m1);
typedef struct {
    tile1_fn t8x1, t8x1_t;
    tile2_fn t8x2, t8x2_t;
} tiles;

#define TILES(name, fold)                                                                         \
    PD_TARGET("avx512f") static PD_NOINLINE void name##_8x1(const pd_product *p, size_t i, size_t j, \
                                                            size_t rows, __mmask8 m0) {            \
        tile_8x1(p, i, j, rows, m0, fold);                                                        \
    }                                                                                             \
    PD_TARGET("avx512f") static PD_NOINLINE void name##_8x1_t(const pd_product *p, size_t i,       \
                                                              size_t j, size_t rows, __mmask8 m0) { \
        tile_8x1_t(p, i, j, rows, m0, fold);                                                      \
    }                                                                                             \
    PD_TARGET("avx512f") static PD_NOINLINE void name##_8x2(const pd_product *p, size_t i, size_t j, \
                                                            size_t rows, __mmask8 m0, __mmask8 m1) { \
        tile_8x2(p, i, j, rows, m0, m1, fold);                                                    \
    }                                                                                             \
    PD_TARGET("avx512f") static PD_NOINLINE void name##_8x2_t(const pd_product *p, size_t i,       \
                                                              size_t j, size_t rows, __mmask8 m0,  \
                                                              __mmask8 m1) {                       \
        tile_8x2_t(p, i, j, rows, m0, m1, fold);                                                  \
    }                                                                                             \
    static const tiles name = {name##_8x1, name##_8x1_t, name##_8x2, name##_8x2_t}

TILES(separate, 0);
TILES(folded, 1);

static const tiles *current_tiles(void) { return pd_avx512_folds() ? &folded : &separate; }

static __mmask8 lanes(size_t n) { return n >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << n) - 1u); }

/* Every tile of the product, 8 rows by up to 16 columns, each by the tile of its width. */
static void sweep(const pd_product *p, tile1_fn narrow, tile2_fn wide) {
    const size_t M = p->M, N = p->N;
    for (size_t j = 0; j < N; j += 16) {
        const size_t cols = N - j < 16 ? N - j : 16;
        const __mmask8 m0 = lanes(cols), m1 = cols > 8 ? lanes(cols - 8) : 0;
        for (size_t i = 0; i < M; i += R) {
            const size_t rows = M - i < R ? M - i : R;
            if (m1) wide(p, i, j, rows, m0, m1);
            else narrow(p, i, j, rows, m0);
        }
    }
}

void pd_small_avx512(const pd_product *p) {
    const tiles *t = current_tiles();
    sweep(p, t->t8x1, t->t8x2);
}

void pd_small_avx512_ct(const pd_product *p) {
    const tiles *t = current_tiles();
    sweep(p, t->t8x1_t, t->t8x2_t);
}
#else
typedef int pd_gemm_small_avx512_unused; /* no x86-64: this path does not exist */
#endif
