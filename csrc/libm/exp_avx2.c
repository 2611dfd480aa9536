/* SPDX-License-Identifier: MIT */
/* The four-lane exp of pd_exp_array (docs/numerics-elementary.md §7.3): §2.2 per lane. */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stdint.h>
#include "bits.h"
#include "exp_array.h"
#include "pd_libm.h"
#include "tables/tables.h"

#define PD_EXP4_ATTR PD_TARGET("avx2,fma")
#define PD_EXP4_STEP static inline __attribute__((always_inline)) PD_EXP4_ATTR

/* The constants of §2 broadcast once per call, not once per group. */
typedef struct {
    __m256d lam, nhi, nlo, c2, c3, c4, c5, s52, lo, hi, absmask, safe;
} pd_exp4_consts;

PD_EXP4_STEP pd_exp4_consts pd_exp4_load(void) {
    pd_exp4_consts c;
    c.lam = _mm256_set1_pd(pd_exp_inv_ln2_n);
    c.nhi = _mm256_set1_pd(pd_exp_neg_ln2_n_hi);
    c.nlo = _mm256_set1_pd(pd_exp_neg_ln2_n_lo);
    c.c2 = _mm256_set1_pd(pd_C_exp[0]);
    c.c3 = _mm256_set1_pd(pd_C_exp[1]);
    c.c4 = _mm256_set1_pd(pd_C_exp[2]);
    c.c5 = _mm256_set1_pd(pd_C_exp[3]);
    c.s52 = _mm256_set1_pd(PD_S52);
    c.lo = _mm256_set1_pd(0x1p-54); /* §2.1: the general class is 2^-54 <= |x| < 512 */
    c.hi = _mm256_set1_pd(512.0);
    c.absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    c.safe = _mm256_set1_pd(-1.0); /* stands in for out-of-range lanes: no inf/NaN arithmetic */
    return c;
}

/* Lanes in §2.2's class: all-ones where 2^-54 <= |x| < 512 (NaN compares false). */
PD_EXP4_STEP __m256d pd_exp4_in_range(const pd_exp4_consts *c, __m256d x) {
    const __m256d ax = _mm256_and_pd(x, c->absmask);
    return _mm256_and_pd(_mm256_cmp_pd(ax, c->lo, _CMP_GE_OQ), _mm256_cmp_pd(ax, c->hi, _CMP_LT_OQ));
}

/* The table pairs (t_i, s_i) of the four lanes, one 16-byte load each, as exp_avx512.c reads
 * them: two four-lane gathers cost more than the loads and unpacks (benchmarks/README.md).
 * Lanes 0,2 fill the 128-bit halves of `ev`, lanes 1,3 those of `od`; the unpacks interleave. */
PD_EXP4_STEP __m256d pd_exp4_table(__m256i i, __m256i *s) {
    int64_t at[4];
    _mm256_storeu_si256((__m256i *)at, _mm256_slli_epi64(i, 1));
#define PD_EXP4_PAIR(j) _mm_loadu_si128((const __m128i *)(pd_T_exp + at[j]))
    const __m256i ev = _mm256_inserti128_si256(_mm256_castsi128_si256(PD_EXP4_PAIR(0)), PD_EXP4_PAIR(2), 1);
    const __m256i od = _mm256_inserti128_si256(_mm256_castsi128_si256(PD_EXP4_PAIR(1)), PD_EXP4_PAIR(3), 1);
#undef PD_EXP4_PAIR
    *s = _mm256_unpackhi_epi64(ev, od);
    return _mm256_castsi256_pd(_mm256_unpacklo_epi64(ev, od));
}

/* §2.2's dataflow on four lanes, each line the same rounding or fusion as the scalar text. */
PD_EXP4_STEP __m256d pd_exp4_general(const pd_exp4_consts *c, __m256d x) {
    /* k = rint(Λ·x) in one rounding: Λ·x + S52 fused, its low bits hold k (§1, §2.2) */
    const __m256d z = _mm256_fmadd_pd(c->lam, x, c->s52);
    const __m256d kd = _mm256_sub_pd(z, c->s52);
    const __m256i kb = _mm256_castpd_si256(z);
    /* r1 = fma(k, N_hi, x), then r = fma(k, N_lo, r1) (§2.2) */
    const __m256d r = _mm256_fmadd_pd(kd, c->nlo, _mm256_fmadd_pd(kd, c->nhi, x));
    /* i = k mod 128; pd_T_exp[2i] is t_i, pd_T_exp[2i+1] + k·2^45 the bits of g = 2^m·H_i (§2) */
    __m256i sb;
    const __m256d t = pd_exp4_table(_mm256_and_si256(kb, _mm256_set1_epi64x(127)), &sb);
    const __m256d g = _mm256_castsi256_pd(_mm256_add_epi64(sb, _mm256_slli_epi64(kb, 45)));
    /* τ = fma(s⊗s, fma(r, C5, C4), fma(s, fma(r, C3, C2), t_i ⊕ r)), s = r⊗r (§2.2) */
    const __m256d s = _mm256_mul_pd(r, r);
    const __m256d p23 = _mm256_fmadd_pd(r, c->c3, c->c2);
    const __m256d p45 = _mm256_fmadd_pd(r, c->c5, c->c4);
    const __m256d inner = _mm256_fmadd_pd(s, p23, _mm256_add_pd(t, r));
    const __m256d tau = _mm256_fmadd_pd(_mm256_mul_pd(s, s), p45, inner);
    /* result fma(g, τ, g) (§2.2) */
    return _mm256_fmadd_pd(g, tau, g);
}

/* §7.3: lanes outside §2.2's class take the scalar pd_exp of their input, kept aside first. */
static void pd_exp4_fixup(const double keep[4], int inmask, double *out) {
    for (int j = 0; j < 4; j++)
        if (!(inmask & (1 << j))) out[j] = pd_exp(keep[j]);
}

PD_EXP4_ATTR void pd_libm_fma_exp_avx2(size_t n, const double *in, double *out) {
    const pd_exp4_consts c = pd_exp4_load();
    for (size_t i = 0; i + 4 <= n; i += 4) {
        const __m256d x = _mm256_loadu_pd(in + i);
        const __m256d ok = pd_exp4_in_range(&c, x);
        const int mask = _mm256_movemask_pd(ok);
        if (__builtin_expect(mask == 0xf, 1)) {
            _mm256_storeu_pd(out + i, pd_exp4_general(&c, x));
        } else {
            double keep[4];
            _mm256_storeu_pd(keep, x);
            /* the vector result of out-of-range lanes is discarded: compute on a safe value */
            _mm256_storeu_pd(out + i, pd_exp4_general(&c, _mm256_blendv_pd(c.safe, x, ok)));
            pd_exp4_fixup(keep, mask, out + i);
        }
    }
}
#else
typedef int pd_libm_exp_avx2_unused; /* the four-lane loop exists on x86-64 GCC/clang only */
#endif
