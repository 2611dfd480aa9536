/* SPDX-License-Identifier: MIT */
/* The head split and merge relabellings between [B, T, Hn*D] rows and [B, Hn, T, D] heads
 * (docs/numerics.md §5.3): exact copies, rows on the pool, noting whether a copied value is not
 * finite (the finiteness check of the value copied, without a second read). */
#include "heads.h"
#include "../kernels/isa.h"
#include "../kernels/nonfinite.h"
#include "../kernels/pool.h"
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#endif

typedef struct {
    size_t T, Hn, D;
    const double *src;
    double *dst;
    int bad; /* some chunk copied a non-finite value */
} heads_ctx;

/* Token rows (b, t): head h of the row is x[(b*T+t)*Hn*D + h*D ...] = heads[((b*Hn+h)*T+t)*D ...].
 * Exact copies in the widest vectors the products' path allows (isa.h). */
#define SPLIT_LOOP                                                                  \
    heads_ctx *c = vctx;                                                            \
    const size_t T = c->T, Hn = c->Hn, D = c->D;                                    \
    uint64_t any = 0;                                                               \
    for (size_t bt = begin; bt < end; bt++)                                         \
        for (size_t h = 0; h < Hn; h++) {                                           \
            const double *xr = c->src + bt * Hn * D + h * D;                        \
            double *hd = c->dst + ((bt / T * Hn + h) * T + bt % T) * D;             \
            for (size_t d = 0; d < D; d++) {                                        \
                hd[d] = xr[d];                                                      \
                any |= pd_nonfinite_bit(xr[d]);                                     \
            }                                                                       \
        }                                                                           \
    if (any >> 63) c->bad = 1;
#define MERGE_LOOP                                                                  \
    heads_ctx *c = vctx;                                                            \
    const size_t T = c->T, Hn = c->Hn, D = c->D;                                    \
    uint64_t any = 0;                                                               \
    for (size_t bt = begin; bt < end; bt++)                                         \
        for (size_t h = 0; h < Hn; h++) {                                           \
            const double *hd = c->src + ((bt / T * Hn + h) * T + bt % T) * D;       \
            double *xr = c->dst + bt * Hn * D + h * D;                              \
            for (size_t d = 0; d < D; d++) {                                        \
                xr[d] = hd[d];                                                      \
                any |= pd_nonfinite_bit(hd[d]);                                     \
            }                                                                       \
        }                                                                           \
    if (any >> 63) c->bad = 1;

#define HEAD_TASKS(suffix, target)                                                         \
    target static void split_rows##suffix(void *vctx, size_t begin, size_t end) { SPLIT_LOOP } \
    target static void merge_rows##suffix(void *vctx, size_t begin, size_t end) { MERGE_LOOP }

PD_ISA_VARIANTS(HEAD_TASKS)

#if PD_ARCH_X86_64
/* Heads a multiple of 8 wide on AVX-512: whole vectors, (b, t) advanced with the row instead of
 * divided out of it, and the notes kept in lanes until the chunk ends (a short head's copy costs
 * less than a division or a reduction). from_rows: rows into heads (split), else heads into rows. */
PD_TARGET("avx512f") static void copy8(void *vctx, size_t begin, size_t end, int from_rows) {
    heads_ctx *c = vctx;
    const size_t T = c->T, Hn = c->Hn, D = c->D;
    const __m512i exponent = _mm512_set1_epi64(0x7FF0000000000000);
    __mmask8 bad = 0; /* lanes that copied an infinity or a NaN */
    size_t b = begin / T, t = begin % T;
    for (size_t bt = begin; bt < end; bt++) {
        for (size_t h = 0; h < Hn; h++) {
            const size_t row = (bt * Hn + h) * D, head = ((b * Hn + h) * T + t) * D;
            const double *from = c->src + (from_rows ? row : head);
            double *to = c->dst + (from_rows ? head : row);
            for (size_t d = 0; d < D; d += 8) {
                const __m512d v = _mm512_loadu_pd(from + d);
                _mm512_storeu_pd(to + d, v);
                bad |= _mm512_cmpeq_epi64_mask(_mm512_and_si512(_mm512_castpd_si512(v), exponent), exponent);
            }
        }
        if (++t == T) t = 0, b++;
    }
    if (bad) c->bad = 1;
}
PD_TARGET("avx512f") static void split8_rows(void *vctx, size_t begin, size_t end) { copy8(vctx, begin, end, 1); }
PD_TARGET("avx512f") static void merge8_rows(void *vctx, size_t begin, size_t end) { copy8(vctx, begin, end, 0); }
#endif

static pd_task_fn current_task(int merge, size_t D) {
#if PD_ARCH_X86_64
    if (D % 8 == 0 && pd_current_isa() == PD_ISA_AVX512) return merge ? merge8_rows : split8_rows;
#endif
    (void)D;
    return merge ? PD_ISA_CURRENT(merge_rows) : PD_ISA_CURRENT(split_rows);
}

int pd_split_heads(size_t B, size_t T, size_t Hn, size_t D, const double *x, double *heads) {
    heads_ctx c = {T, Hn, D, x, heads, 0};
    pd_parallel_for(B * T, 1 + PD_EW_GRAIN / (Hn * D + 1), current_task(0, D), &c);
    return c.bad;
}

int pd_merge_heads(size_t B, size_t T, size_t Hn, size_t D, const double *heads, double *x) {
    heads_ctx c = {T, Hn, D, heads, x, 0};
    pd_parallel_for(B * T, 1 + PD_EW_GRAIN / (Hn * D + 1), current_task(1, D), &c);
    return c.bad;
}
