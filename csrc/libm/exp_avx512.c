/* SPDX-License-Identifier: MIT */
/* The eight-lane exp of pd_exp_array (docs/numerics-elementary.md §7.3): §2.2 per lane. */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stdint.h>
#include "bits.h"
#include "exp_array.h"
#include "pd_libm.h"
#include "tables/tables.h"

/* AVX-512F alone: its EVEX encoding carries the fused multiply-add on 512-bit registers. */
#define PD_EXP8_ATTR PD_TARGET("avx512f")
#define PD_EXP8_STEP static inline __attribute__((always_inline)) PD_EXP8_ATTR

/* The constants of §2 broadcast once per call, not once per group. */
typedef struct {
    __m512d lam, nhi, nlo, c2, c3, c4, c5, s52, lo, safe, one;
    __m512i absmask, low7, lo_bits, span_bits;
} pd_exp8_consts;

PD_EXP8_STEP pd_exp8_consts pd_exp8_load(void) {
    pd_exp8_consts c;
    c.lam = _mm512_set1_pd(pd_exp_inv_ln2_n);
    c.nhi = _mm512_set1_pd(pd_exp_neg_ln2_n_hi);
    c.nlo = _mm512_set1_pd(pd_exp_neg_ln2_n_lo);
    c.c2 = _mm512_set1_pd(pd_C_exp[0]);
    c.c3 = _mm512_set1_pd(pd_C_exp[1]);
    c.c4 = _mm512_set1_pd(pd_C_exp[2]);
    c.c5 = _mm512_set1_pd(pd_C_exp[3]);
    c.s52 = _mm512_set1_pd(PD_S52);
    c.lo = _mm512_set1_pd(0x1p-54); /* §2.1: the general class is 2^-54 <= |x| < 512 */
    c.safe = _mm512_set1_pd(-1.0); /* stands in for out-of-range lanes: no inf/NaN arithmetic */
    c.one = _mm512_set1_pd(1.0);
    c.absmask = _mm512_set1_epi64(0x7fffffffffffffffll);
    c.low7 = _mm512_set1_epi64(127);
    /* the class as bit patterns: |x| >= 0 orders like its bits, NaN's above +inf's */
    c.lo_bits = _mm512_set1_epi64((long long)pd_bits(0x1p-54));
    c.span_bits = _mm512_set1_epi64((long long)(pd_bits(512.0) - pd_bits(0x1p-54)));
    return c;
}

/* |x| by an integer AND: the floating-point AND of 512-bit registers needs AVX-512DQ. */
PD_EXP8_STEP __m512d pd_exp8_abs(const pd_exp8_consts *c, __m512d x) {
    return _mm512_castsi512_pd(_mm512_and_epi64(_mm512_castpd_si512(x), c->absmask));
}

/* Lanes in §2.2's class: bit j set where 2^-54 <= |x_j| < 512, NaN not (one unsigned compare
 * of |x|'s bits less 2^-54's: below 2^-54 wraps to a huge value). */
PD_EXP8_STEP __mmask8 pd_exp8_in_range(const pd_exp8_consts *c, __m512d x) {
    const __m512i ax = _mm512_castpd_si512(pd_exp8_abs(c, x));
    return _mm512_cmplt_epu64_mask(_mm512_sub_epi64(ax, c->lo_bits), c->span_bits);
}

/* Lanes of §2.1's first class, |x_j| < 2^-54 (±0 included), whose result is exactly 1.0. */
PD_EXP8_STEP __mmask8 pd_exp8_tiny(const pd_exp8_consts *c, __m512d x) {
    return _mm512_cmp_pd_mask(pd_exp8_abs(c, x), c->lo, _CMP_LT_OQ);
}

/* The table pairs (t_i, s_i) of the eight lanes, one 16-byte load each: two eight-lane gathers
 * cost more than the rest of the evaluation (benchmarks/README.md). The offsets 2i < 256 leave
 * as the eight bytes of one vmovq (one move, not eight). Lanes 0,2,4,6 fill the 128-bit blocks
 * of `ev`, lanes 1,3,5,7 those of `od`; the unpacks interleave them back. */
PD_EXP8_STEP __m512d pd_exp8_table(__m512i i, __m512i *s) {
    const uint64_t at = (uint64_t)_mm_cvtsi128_si64(_mm512_cvtepi64_epi8(_mm512_slli_epi64(i, 1)));
#define PD_EXP8_PAIR(j) _mm_loadu_si128((const __m128i *)(pd_T_exp + (uint8_t)(at >> (8 * (j)))))
    const __m256i ev_lo = _mm256_inserti128_si256(_mm256_castsi128_si256(PD_EXP8_PAIR(0)), PD_EXP8_PAIR(2), 1);
    const __m256i ev_hi = _mm256_inserti128_si256(_mm256_castsi128_si256(PD_EXP8_PAIR(4)), PD_EXP8_PAIR(6), 1);
    const __m256i od_lo = _mm256_inserti128_si256(_mm256_castsi128_si256(PD_EXP8_PAIR(1)), PD_EXP8_PAIR(3), 1);
    const __m256i od_hi = _mm256_inserti128_si256(_mm256_castsi128_si256(PD_EXP8_PAIR(5)), PD_EXP8_PAIR(7), 1);
#undef PD_EXP8_PAIR
    const __m512i ev = _mm512_inserti64x4(_mm512_castsi256_si512(ev_lo), ev_hi, 1);
    const __m512i od = _mm512_inserti64x4(_mm512_castsi256_si512(od_lo), od_hi, 1);
    *s = _mm512_unpackhi_epi64(ev, od);
    return _mm512_castsi512_pd(_mm512_unpacklo_epi64(ev, od));
}

/* §2.2's dataflow on eight lanes, each line the same rounding or fusion as the scalar text. */
PD_EXP8_STEP __m512d pd_exp8_general(const pd_exp8_consts *c, __m512d x) {
    /* k = rint(Λ·x) in one rounding: Λ·x + S52 fused, its low bits hold k (§1, §2.2) */
    const __m512d z = _mm512_fmadd_pd(c->lam, x, c->s52);
    const __m512d kd = _mm512_sub_pd(z, c->s52);
    const __m512i kb = _mm512_castpd_si512(z);
    /* r1 = fma(k, N_hi, x), then r = fma(k, N_lo, r1) (§2.2) */
    const __m512d r = _mm512_fmadd_pd(kd, c->nlo, _mm512_fmadd_pd(kd, c->nhi, x));
    /* i = k mod 128; pd_T_exp[2i] is t_i, pd_T_exp[2i+1] + k·2^45 the bits of g = 2^m·H_i (§2) */
    __m512i sb;
    const __m512d t = pd_exp8_table(_mm512_and_epi64(kb, c->low7), &sb);
    const __m512d g = _mm512_castsi512_pd(_mm512_add_epi64(sb, _mm512_slli_epi64(kb, 45)));
    /* τ = fma(s⊗s, fma(r, C5, C4), fma(s, fma(r, C3, C2), t_i ⊕ r)), s = r⊗r (§2.2) */
    const __m512d s = _mm512_mul_pd(r, r);
    const __m512d p23 = _mm512_fmadd_pd(r, c->c3, c->c2);
    const __m512d p45 = _mm512_fmadd_pd(r, c->c5, c->c4);
    const __m512d inner = _mm512_fmadd_pd(s, p23, _mm512_add_pd(t, r));
    const __m512d tau = _mm512_fmadd_pd(_mm512_mul_pd(s, s), p45, inner);
    /* result fma(g, τ, g) (§2.2) */
    return _mm512_fmadd_pd(g, tau, g);
}

/* §7.3: lanes outside §2.2's class take the scalar pd_exp of their input, kept aside first. */
static void pd_exp8_fixup(const double keep[8], unsigned inmask, double *out) {
    for (unsigned j = 0; j < 8; j++)
        if (!(inmask & (1u << j))) out[j] = pd_exp(keep[j]);
}

/* A group with lanes outside §2.2's class; lanes of `m` stored (the tail's others are -1.0). */
PD_EXP8_STEP void pd_exp8_mixed(const pd_exp8_consts *c, __m512d x, __mmask8 ok, __mmask8 m, double *out) {
    /* the vector result of out-of-range lanes is discarded: compute on a safe value */
    const __m512d y = pd_exp8_general(c, _mm512_mask_blend_pd(ok, c->safe, x));
    /* tiny lanes (a softmax row's zero shift) take their exact 1.0 here, not a scalar call */
    const __mmask8 tiny = pd_exp8_tiny(c, x);
    const __m512d v = _mm512_mask_blend_pd(tiny, y, c->one);
    if (__builtin_expect((__mmask8)(ok | tiny) == 0xff, 1)) {
        _mm512_mask_storeu_pd(out, m, v);
        return;
    }
    double keep[8], res[8];
    _mm512_storeu_pd(keep, x);
    _mm512_storeu_pd(res, v);
    pd_exp8_fixup(keep, (unsigned)(ok | tiny), res);
    _mm512_mask_storeu_pd(out, m, _mm512_loadu_pd(res));
}

PD_EXP8_ATTR void pd_libm_fma_exp_avx512(size_t n, const double *in, double *out) {
    const pd_exp8_consts c = pd_exp8_load();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m512d x = _mm512_loadu_pd(in + i);
        const __mmask8 ok = pd_exp8_in_range(&c, x);
        if (__builtin_expect(ok == 0xff, 1))
            _mm512_storeu_pd(out + i, pd_exp8_general(&c, x));
        else
            pd_exp8_mixed(&c, x, ok, 0xff, out + i);
    }
    if (i < n) {
        /* the last n mod 8 lanes by masked loads and stores, the others -1.0 (in range): no
         * second call through a buffer, which short rows (softmax, RMS groups) paid per row */
        const __mmask8 m = (__mmask8)((1u << (n - i)) - 1);
        const __m512d x = _mm512_mask_loadu_pd(c.safe, m, in + i);
        const __mmask8 ok = pd_exp8_in_range(&c, x);
        if (ok == 0xff)
            _mm512_mask_storeu_pd(out + i, m, pd_exp8_general(&c, x));
        else
            pd_exp8_mixed(&c, x, ok, m, out + i);
    }
}
/* exp(in[i] - mx) over an array, the subtraction its own rounding as in a separate pass (§7.3,
 * pd_exp_shifted_array): a softmax row's shift and exps in one sweep. Returns the first i whose
 * difference is zero (n when none), found by a compare per group until one is found. */
PD_EXP8_ATTR size_t pd_libm_fma_exp_shifted_avx512(size_t n, const double *in, double mx, double *out) {
    const pd_exp8_consts c = pd_exp8_load();
    const __m512d vm = _mm512_set1_pd(mx), zero = _mm512_setzero_pd();
    size_t i = 0, first = n;
    for (; i + 8 <= n; i += 8) {
        const __m512d x = _mm512_sub_pd(_mm512_loadu_pd(in + i), vm);
        if (first == n) {
            const unsigned z = _mm512_cmp_pd_mask(x, zero, _CMP_EQ_OQ);
            if (z) first = i + (size_t)__builtin_ctz(z);
        }
        const __mmask8 ok = pd_exp8_in_range(&c, x);
        if (__builtin_expect(ok == 0xff, 1))
            _mm512_storeu_pd(out + i, pd_exp8_general(&c, x));
        else
            pd_exp8_mixed(&c, x, ok, 0xff, out + i);
    }
    if (i < n) { /* the tail as pd_libm_fma_exp_avx512's: lanes past n hold -1.0 */
        const __mmask8 m = (__mmask8)((1u << (n - i)) - 1);
        const __m512d x = _mm512_mask_sub_pd(c.safe, m, _mm512_maskz_loadu_pd(m, in + i), vm);
        if (first == n) {
            const unsigned z = _mm512_mask_cmp_pd_mask(m, x, zero, _CMP_EQ_OQ);
            if (z) first = i + (size_t)__builtin_ctz(z);
        }
        const __mmask8 ok = pd_exp8_in_range(&c, x);
        if (ok == 0xff)
            _mm512_mask_storeu_pd(out + i, m, pd_exp8_general(&c, x));
        else
            pd_exp8_mixed(&c, x, ok, m, out + i);
    }
    return first;
}
#else
typedef int pd_libm_exp_avx512_unused; /* the eight-lane loop exists on x86-64 GCC/clang only */
#endif
