/* exp over arrays, four lanes at a time with AVX2 and FMA: the same operations as pd_exp
 * (exp_core.h) per lane, so the same bits. Lanes outside 2^-54 <= |x| < 512 (a softmax row's
 * zero shift, for one) take pd_exp alone, and a short tail runs as one group padded in range,
 * so the rest of such a group stays in the vector loop. */
#include <string.h>
#include "exp_avx2.h"
#include "exp.h"
#include "../platform/pd_platform.h"

#if PD_ARCH_X86_64
#include <immintrin.h>
#include "exp_core.h"

/* Global and named pd_libm_fma_*, like every function allowed to hold FMA instructions. */
PD_TARGET("avx2,fma") void pd_libm_fma_exp_array(size_t n, const double *in, double *out) {
    const __m256d inv_ln2_n = _mm256_set1_pd(PD_EXP_INV_LN2_N);
    const __m256d shift = _mm256_set1_pd(PD_EXP_SHIFT);
    const __m256d neg_hi = _mm256_set1_pd(PD_EXP_NEG_LN2_HI_N);
    const __m256d neg_lo = _mm256_set1_pd(PD_EXP_NEG_LN2_LO_N);
    const __m256d c2 = _mm256_set1_pd(PD_EXP_C2), c3 = _mm256_set1_pd(PD_EXP_C3);
    const __m256d c4 = _mm256_set1_pd(PD_EXP_C4), c5 = _mm256_set1_pd(PD_EXP_C5);
    const __m256i exp_mask = _mm256_set1_epi64x(0x7ff);
    const __m256i lo_top = _mm256_set1_epi64x(0x3c9 - 1), hi_top = _mm256_set1_epi64x(0x408);
    const __m256i idx_mask = _mm256_set1_epi64x(PD_EXP_N - 1);
    const long long *tab = (const long long *)pd_exp_table;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m256d x = _mm256_loadu_pd(in + i);
        const __m256i top = _mm256_and_si256(_mm256_srli_epi64(_mm256_castpd_si256(x), 52), exp_mask);
        const __m256i ok = _mm256_and_si256(_mm256_cmpgt_epi64(top, lo_top),
                                            _mm256_cmpgt_epi64(hi_top, top));
        const int in_range = _mm256_movemask_pd(_mm256_castsi256_pd(ok)); /* bit l: lane l */
        const __m256d shifted = _mm256_fmadd_pd(inv_ln2_n, x, shift);
        const __m256d kd = _mm256_sub_pd(shifted, shift);
        const __m256i ki = _mm256_castpd_si256(shifted);
        __m256d r = _mm256_fmadd_pd(kd, neg_hi, x);
        r = _mm256_fmadd_pd(kd, neg_lo, r);
        const __m256i idx = _mm256_slli_epi64(_mm256_and_si256(ki, idx_mask), 1);
        const __m256d tail = _mm256_castsi256_pd(_mm256_i64gather_epi64(tab, idx, 8));
        const __m256i sbits = _mm256_add_epi64(_mm256_i64gather_epi64(tab + 1, idx, 8),
                                               _mm256_slli_epi64(ki, 52 - 7));
        const __m256d r2 = _mm256_mul_pd(r, r);
        const __m256d p23 = _mm256_fmadd_pd(r, c3, c2);
        const __m256d p45 = _mm256_fmadd_pd(r, c5, c4);
        const __m256d lead = _mm256_add_pd(tail, r);
        const __m256d tmp = _mm256_fmadd_pd(_mm256_mul_pd(r2, r2), p45, _mm256_fmadd_pd(r2, p23, lead));
        const __m256d scale = _mm256_castsi256_pd(sbits);
        const __m256d y = _mm256_fmadd_pd(scale, tmp, scale); /* out-of-range lanes: replaced below */
        if (in_range == 0xf) {
            _mm256_storeu_pd(out + i, y);
            continue;
        }
        double xs[4], ys[4]; /* x kept aside: out may be in */
        _mm256_storeu_pd(xs, x);
        _mm256_storeu_pd(ys, y);
        for (int l = 0; l < 4; l++) out[i + l] = (in_range >> l & 1) ? ys[l] : pd_exp(xs[l]);
    }
    if (i < n) {
        double t[4] = {-1.0, -1.0, -1.0, -1.0};
        memcpy(t, in + i, (n - i) * sizeof(double));
        pd_libm_fma_exp_array(4, t, t);
        memcpy(out + i, t, (n - i) * sizeof(double));
    }
}

const pd_exp_array_fn pd_exp_array_avx2_fma = pd_libm_fma_exp_array;
#else
const pd_exp_array_fn pd_exp_array_avx2_fma = 0;
#endif
