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

/* The head split or merge (ops/heads.c's relabelling) and the rotation in one sweep over token
 * rows (b, t): forward, a head's row of x is copied into heads and rotated into out; inverse, a
 * rotated head's row is turned back into heads and copied into out's token row. Each value is
 * the separate passes' (copies are exact; the rotation reads the same values). */
typedef struct {
    const pd_rope *r;
    size_t Hn;
    const double *in;   /* forward: token rows; inverse: rotated heads */
    double *heads, *out; /* forward: the split heads, the rotated ones; inverse: heads, token rows */
    int bad;             /* some value read is not finite */
} fused_ctx;

/* Token rows [begin, end), each head's row at tok in the token layout and hd in the heads'. */
#define FUSED_ROWS(BODY)                                                                      \
    fused_ctx *c = vctx;                                                                      \
    uint64_t any = 0;                                                                         \
    const size_t half = c->r->D / 2, T = c->r->T, D = c->r->D, Hn = c->Hn;                    \
    for (size_t bt = begin; bt < end; bt++) {                                                 \
        const size_t b = bt / T, t = bt % T, p = c->r->pos[bt];                               \
        const double *sr = c->r->sin_t + p * half, *cr = c->r->cos_t + p * half;             \
        for (size_t h = 0; h < Hn; h++) {                                                     \
            const size_t tok = (bt * Hn + h) * D, hd = ((b * Hn + h) * T + t) * D;           \
            BODY                                                                              \
        }                                                                                     \
    }                                                                                         \
    if (any >> 63) c->bad = 1;
/* forward: x's row copied into the split heads (its finiteness noted) and rotated */
#define SPLIT_ROTATE_BODY                                                                     \
    const double *a = c->in + tok;                                                            \
    double *o = c->out + hd;                                                                  \
    for (size_t d = 0; d < D; d++) {                                                          \
        c->heads[hd + d] = a[d];                                                              \
        any |= pd_nonfinite_bit(a[d]);                                                        \
    }                                                                                         \
    ROTATE_LOOP
/* inverse: each pair turned back and stored to the heads and the token row from its register
 * (reloading the heads' row just stored would wait on the stores) */
#define UNROTATE_MERGE_BODY                                                                   \
    const double *a = c->in + hd;                                                             \
    double *o = c->heads + hd, *o2 = c->out + tok;                                            \
    for (size_t j = 0; j < half; j++) {                                                       \
        const double l = a[2 * j], r = a[2 * j + 1], cs = cr[j], s = sr[j];                   \
        const double v0 = pd_canon(l * cs + r * s), v1 = pd_canon(r * cs - l * s);            \
        o[2 * j] = o2[2 * j] = v0;                                                            \
        o[2 * j + 1] = o2[2 * j + 1] = v1;                                                    \
        any |= pd_nonfinite_bit(l) | pd_nonfinite_bit(r);                                     \
    }

#define FUSED_TASKS(suffix, target)                                                               \
    target static void split_rotate##suffix(void *vctx, size_t begin, size_t end) {             \
        FUSED_ROWS(SPLIT_ROTATE_BODY)                                                             \
    }                                                                                             \
    target static void unrotate_merge##suffix(void *vctx, size_t begin, size_t end) {           \
        FUSED_ROWS(UNROTATE_MERGE_BODY)                                                           \
    }

PD_ISA_VARIANTS(FUSED_TASKS)

#if PD_ARCH_X86_64
/* Heads a multiple of 8 wide on AVX-512: four pairs per vector. With p1 = (l*cs, r*cs) and
 * p2 = (r*s, l*s) per pair, the forward pair is (p1 - p2, p1 + p2) and the inverse one
 * (p1 + p2, p1 - p2) lane by lane: the products and the one add or subtract of the text
 * (an add's operands commute exactly). Rows run head by head, so no division finds a position. */
/* Four pairs of x turned by their table entries cr[0..4), sr[0..4): the lanes of pick take
 * p1 + p2, the others p1 - p2, each canonical. */
PD_TARGET("avx512f") static inline __m512d turn8(__m512d x, const double *cr, const double *sr, __mmask8 pick) {
    const __m512i dup = _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0);
    const __m512d zero = _mm512_setzero_pd();
    const __m512d cs = _mm512_permutexvar_pd(dup, _mm512_castpd256_pd512(_mm256_loadu_pd(cr)));
    const __m512d sn = _mm512_permutexvar_pd(dup, _mm512_castpd256_pd512(_mm256_loadu_pd(sr)));
    const __m512d p1 = _mm512_mul_pd(x, cs), p2 = _mm512_mul_pd(_mm512_permute_pd(x, 0x55), sn);
    const __m512d v = _mm512_mask_blend_pd(pick, _mm512_sub_pd(p1, p2), _mm512_add_pd(p1, p2));
    return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(v, zero, _CMP_EQ_OQ), v, zero);
}

PD_TARGET("avx512f") static void rotate8(void *vctx, size_t begin, size_t end, int inverse) {
    rope_ctx *c = vctx;
    const size_t half = c->r->D / 2, T = c->r->T, D = c->r->D, Hn = c->Hn;
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
                _mm512_storeu_pd(o + j, turn8(x, cr + j / 2, sr + j / 2, pick));
            }
        }
    }
    if (bad) c->bad = 1;
}
/* The fused sweep of heads a multiple of 8 wide on AVX-512: whole vectors, (b, t) advanced with
 * the row, finiteness noted in lanes. */
PD_TARGET("avx512f") static void fused8(void *vctx, size_t begin, size_t end, int inverse) {
    fused_ctx *c = vctx;
    const size_t half = c->r->D / 2, T = c->r->T, D = c->r->D, Hn = c->Hn;
    const __mmask8 pick = inverse ? (__mmask8)0x55 : (__mmask8)0xAA;
    const __m512i exponent = _mm512_set1_epi64(0x7FF0000000000000);
    __mmask8 bad = 0;
    size_t b = begin / T, t = begin % T;
    for (size_t bt = begin; bt < end; bt++) {
        const size_t p = c->r->pos[bt];
        const double *sr = c->r->sin_t + p * half, *cr = c->r->cos_t + p * half;
        for (size_t h = 0; h < Hn; h++) {
            const size_t tok = (bt * Hn + h) * D, hd = ((b * Hn + h) * T + t) * D;
            const double *a = c->in + (inverse ? hd : tok);
            for (size_t j = 0; j < D; j += 8) {
                const __m512d x = _mm512_loadu_pd(a + j);
                bad |= _mm512_cmpeq_epi64_mask(_mm512_and_si512(_mm512_castpd_si512(x), exponent), exponent);
                const __m512d v = turn8(x, cr + j / 2, sr + j / 2, pick);
                _mm512_storeu_pd(c->heads + hd + j, inverse ? v : x);
                _mm512_storeu_pd(c->out + (inverse ? tok : hd) + j, v);
            }
        }
        if (++t == T) t = 0, b++;
    }
    if (bad) c->bad = 1;
}
PD_TARGET("avx512f") static void split_rotate8(void *vctx, size_t begin, size_t end) { fused8(vctx, begin, end, 0); }
PD_TARGET("avx512f") static void unrotate_merge8(void *vctx, size_t begin, size_t end) {
    fused8(vctx, begin, end, 1);
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

static pd_task_fn fused_task(int inverse, size_t D) {
#if PD_ARCH_X86_64
    if (D % 8 == 0 && pd_current_isa() == PD_ISA_AVX512) return inverse ? unrotate_merge8 : split_rotate8;
#endif
    (void)D;
    return inverse ? PD_ISA_CURRENT(unrotate_merge) : PD_ISA_CURRENT(split_rotate);
}

static int fused_apply(const pd_rope *r, size_t Hn, const double *in, double *heads, double *out, int inverse) {
    fused_ctx c = {r, Hn, in, heads, out, 0};
    const size_t D = r->D;
    pd_parallel_for(r->B * r->T, 1 + PD_EW_GRAIN / (Hn * D + 1), fused_task(inverse, D), &c);
    return c.bad;
}

int pd_rope_split(const pd_rope *r, size_t Hn, const double *x, double *heads, double *rot) {
    return fused_apply(r, Hn, x, heads, rot, 0);
}

int pd_rope_unrotate_merge(const pd_rope *r, size_t Hn, const double *rot, double *heads, double *x) {
    return fused_apply(r, Hn, rot, heads, x, 1);
}
