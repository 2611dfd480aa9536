/* SPDX-License-Identifier: MIT */
/* RoPE tables and rotations (docs/numerics.md §5.2, §6.2). */
#include <math.h>
#include "rope.h"
#include "canon.h"
#include "../kernels/isa.h"
#include "../kernels/nonfinite.h"
#include "../kernels/pool.h"
#include "../libm/pd_libm.h"
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#endif

pd_status pd_rope_tables(size_t P, size_t D, double base, double *sin_t, double *cos_t, pd_error *e) {
    const size_t half = D / 2;
    for (size_t j = 0; j < half; j++) {
        double ex = (-2.0 * (double)j) / (double)D; /* multiply first, then divide */
        double inv = pd_pow(base, ex);
        if (!isfinite(inv)) return pd_fail(e, PD_ERR_ROPE, j, inv, -1, -1);
        for (size_t p = 0; p < P; p++) {
            double angle = (double)p * inv;
            double s = pd_sin(angle), c = pd_cos(angle);
            if (!isfinite(angle) || !isfinite(s) || !isfinite(c))
                return pd_fail(e, PD_ERR_ROPE, p * half + j, angle, -1, -1);
            sin_t[p * half + j] = pd_canon(s);
            cos_t[p * half + j] = pd_canon(c);
        }
    }
    return PD_OK;
}

/* One head row's pairs, rotated forward (§5.2) or back (the VJP: the
 * inverse rotation with the same table entries), in the widest vectors the products' path
 * allows (isa.h); each pair's operations are the same on every path. The rows read are noted
 * for finiteness, so the value rotated needs no scan of its own. */
#define ROTATE_LOOP                                                                 \
    for (size_t j = 0; j < half; j++) {                                             \
        const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];         \
        o[2 * j] = pd_canon(l * cs - r * s);                                        \
        o[2 * j + 1] = pd_canon(l * s + r * cs);                                    \
        any |= pd_nonfinite_bit(l) | pd_nonfinite_bit(r);                           \
    }
#define UNROTATE_LOOP                                                               \
    for (size_t j = 0; j < half; j++) {                                             \
        const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];         \
        o[2 * j] = pd_canon(l * cs + r * s);                                        \
        o[2 * j + 1] = pd_canon(r * cs - l * s);                                    \
        any |= pd_nonfinite_bit(l) | pd_nonfinite_bit(r);                           \
    }

typedef struct {
    const pd_rope *r;
    size_t Hn;
    const double *in;
    double *out;
    int bad; /* some chunk read a non-finite value */
} rope_ctx;

/* Rows are (b, h, t) head rows; each writes only its own output row. */
#define ROWS_LOOP(PAIRS)                                                                      \
    rope_ctx *c = vctx;                                                                       \
    uint64_t any = 0;                                                                         \
    const size_t half = c->r->D / 2, T = c->r->T, D = c->r->D, Hn = c->Hn;                    \
    const size_t *pos = c->r->pos;                                                            \
    const double *sin_t = c->r->sin_t, *cos_t = c->r->cos_t;                                  \
    for (size_t row = begin; row < end; row++) {                                              \
        const size_t p = pos[row / (Hn * T) * T + row % T];                                   \
        const double *sr = sin_t + p * half, *cr = cos_t + p * half, *a = c->in + row * D;    \
        double *o = c->out + row * D;                                                         \
        PAIRS                                                                                 \
    }                                                                                         \
    if (any >> 63) c->bad = 1;

#define ROPE_TASKS(suffix, target)                                                                \
    target static void rotate_rows##suffix(void *vctx, size_t begin, size_t end) {               \
        ROWS_LOOP(ROTATE_LOOP)                                                                    \
    }                                                                                             \
    target static void unrotate_rows##suffix(void *vctx, size_t begin, size_t end) {             \
        ROWS_LOOP(UNROTATE_LOOP)                                                                  \
    }

PD_ISA_VARIANTS(ROPE_TASKS)

#if PD_ARCH_X86_64
/* Heads a multiple of 8 wide on AVX-512: four pairs per vector. With p1 = (l*cs, r*cs) and
 * p2 = (r*s, l*s) per pair, the forward pair is (p1 - p2, p1 + p2) and the inverse one
 * (p1 + p2, p1 - p2) lane by lane: the products and the one add or subtract of the text
 * (an add's operands commute exactly). Rows run head by head, so no division finds a position. */
PD_TARGET("avx512f") static void rotate8(void *vctx, size_t begin, size_t end, int inverse) {
    rope_ctx *c = vctx;
    const size_t half = c->r->D / 2, T = c->r->T, D = c->r->D, Hn = c->Hn;
    const __m512i dup = _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0);
    const __m512d zero = _mm512_setzero_pd();
    const __mmask8 odd = 0xAA, pick = inverse ? (__mmask8)0x55 : odd; /* the lanes taking p1 + p2 */
    const __m512i exponent = _mm512_set1_epi64(0x7FF0000000000000);
    __mmask8 bad = 0; /* lanes that read an infinity or a NaN */
    for (size_t row = begin; row < end;) {
        const size_t head = row / T, t0 = row % T, t1 = end - (row - t0) < T ? end - (row - t0) : T;
        const size_t *pos = c->r->pos + head / Hn * T;
        for (size_t t = t0; t < t1; t++, row++) {
            const double *sr = c->r->sin_t + pos[t] * half, *cr = c->r->cos_t + pos[t] * half;
            const double *a = c->in + row * D;
            double *o = c->out + row * D;
            for (size_t j = 0; j < D; j += 8) {
                const __m512d x = _mm512_loadu_pd(a + j);
                bad |= _mm512_cmpeq_epi64_mask(_mm512_and_si512(_mm512_castpd_si512(x), exponent), exponent);
                const __m512d cs = _mm512_permutexvar_pd(dup, _mm512_castpd256_pd512(_mm256_loadu_pd(cr + j / 2)));
                const __m512d sn = _mm512_permutexvar_pd(dup, _mm512_castpd256_pd512(_mm256_loadu_pd(sr + j / 2)));
                const __m512d p1 = _mm512_mul_pd(x, cs), p2 = _mm512_mul_pd(_mm512_permute_pd(x, 0x55), sn);
                const __m512d v = _mm512_mask_blend_pd(pick, _mm512_sub_pd(p1, p2), _mm512_add_pd(p1, p2));
                _mm512_storeu_pd(o + j, _mm512_mask_blend_pd(_mm512_cmp_pd_mask(v, zero, _CMP_EQ_OQ), v, zero));
            }
        }
    }
    if (bad) c->bad = 1;
}
PD_TARGET("avx512f") static void rotate8_rows(void *vctx, size_t begin, size_t end) { rotate8(vctx, begin, end, 0); }
PD_TARGET("avx512f") static void unrotate8_rows(void *vctx, size_t begin, size_t end) {
    rotate8(vctx, begin, end, 1);
}
#endif

static pd_task_fn current_task(int inverse, size_t D) {
#if PD_ARCH_X86_64
    if (D % 8 == 0 && pd_current_isa() == PD_ISA_AVX512) return inverse ? unrotate8_rows : rotate8_rows;
#endif
    (void)D;
    return inverse ? PD_ISA_CURRENT(unrotate_rows) : PD_ISA_CURRENT(rotate_rows);
}

int pd_rope_apply(const pd_rope *r, size_t Hn, const double *in, double *out, int inverse) {
    rope_ctx c = {r, Hn, in, out, 0};
    const size_t D = r->D;
    pd_parallel_for(r->B * Hn * r->T, 1 + PD_EW_GRAIN / (D ? D : 1), current_task(inverse, D), &c);
    return c.bad;
}
