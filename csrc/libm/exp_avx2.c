/* SPDX-License-Identifier: MIT */
/* exp four lanes at a time with AVX2 and FMA (docs/numerics-elementary.md §7.3): the steps
 * E1-E4 of §2.2 lane by lane, the table read by gather; lanes outside §2.1's main class take
 * the scalar pd_exp. x86-64 GCC/clang only; the function is an FMA build (§7.1). */
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include "bits.h"
#include "exp_array.h"
#include "pd_libm.h"
#include "tables/tables.h"

#define PD_AVX2 PD_TARGET("avx2,fma")

/* E1-E4 on four lanes; bit i of the return value is set when lane i is outside the main class. */
static inline __attribute__((always_inline)) PD_AVX2 int
pd_libm_fma_exp4(const double *in, double *out) {
    const __m256d x = _mm256_loadu_pd(in);
    const __m256i ax = _mm256_and_si256(_mm256_castpd_si256(x), _mm256_set1_epi64x(0x7fffffffffffffffll));
    const __m256i below = _mm256_cmpgt_epi64(_mm256_set1_epi64x(0x3c90000000000000ll), ax);
    const __m256i above = _mm256_cmpgt_epi64(ax, _mm256_set1_epi64x(0x407fffffffffffffll));
    const int outside = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_or_si256(below, above)));
    const __m256d S52 = _mm256_set1_pd(PD_S52); /* E1 */
    const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(pd_exp_inv_ln2_n), x, S52);
    const __m256d kappa = _mm256_sub_pd(z, S52);
    const __m256i K = _mm256_castpd_si256(z);
    __m256d r = _mm256_fmadd_pd(kappa, _mm256_set1_pd(pd_exp_neg_ln2_n_hi), x);
    r = _mm256_fmadd_pd(kappa, _mm256_set1_pd(pd_exp_neg_ln2_n_lo), r);
    const __m256i i2 = _mm256_slli_epi64(_mm256_and_si256(K, _mm256_set1_epi64x(127)), 1); /* E2 */
    const __m256d t = _mm256_i64gather_pd((const double *)pd_T_exp, i2, 8);
    const __m256i s = _mm256_i64gather_epi64((const long long *)(pd_T_exp + 1), i2, 8);
    const __m256i sigma = _mm256_add_epi64(s, _mm256_slli_epi64(K, 45));
    const __m256d r2 = _mm256_mul_pd(r, r); /* E3 */
    const __m256d q1 = _mm256_fmadd_pd(r, _mm256_set1_pd(pd_C_exp[1]), _mm256_set1_pd(pd_C_exp[0]));
    const __m256d q2 = _mm256_fmadd_pd(r, _mm256_set1_pd(pd_C_exp[3]), _mm256_set1_pd(pd_C_exp[2]));
    const __m256d lead = _mm256_add_pd(t, r);
    const __m256d tau = _mm256_fmadd_pd(_mm256_mul_pd(r2, r2), q2, _mm256_fmadd_pd(r2, q1, lead));
    const __m256d g = _mm256_castsi256_pd(sigma); /* E4 */
    _mm256_storeu_pd(out, _mm256_fmadd_pd(g, tau, g));
    return outside;
}

PD_AVX2 void pd_libm_fma_exp_avx2(size_t n, const double *in, double *out) {
    for (size_t i = 0; i < n; i += 4) {
        const __m256d keep = _mm256_loadu_pd(in + i); /* out may be in */
        const int outside = pd_libm_fma_exp4(in + i, out + i);
        if (outside) {
            double x[4];
            _mm256_storeu_pd(x, keep);
            for (int l = 0; l < 4; l++)
                if (outside >> l & 1) out[i + l] = pd_exp(x[l]);
        }
    }
}
#else
typedef int pd_libm_exp_avx2_unused; /* no AVX2 build off x86-64 GCC/clang */
#endif
