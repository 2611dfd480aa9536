/* SPDX-License-Identifier: MIT */
/* Attention's softmax rows (attn_rows.h): the scalar text row by row, and on the AVX-512 path
 * whole rows of eight-lane groups (T a multiple of 8), the groups holding a row's keys computed
 * (lanes outside its keys on +0.0) and every other lane written +0.0. Per allowed
 * entry both do the same operations; the sequential sums (the tail, the VJP's weighted sum)
 * stay one add at a time in order. */
#include <math.h>
#include <string.h>
#include "attn_rows.h"
#include "canon.h"
#include "softmax_steps.h"
#include "../kernels/isa.h"
#include "../kernels/nonfinite.h"
#include "../libm/pd_libm.h"
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#endif

/* The tail of the denominator: terms ascending, the first maximal one left out. */
static double row_tail(const double *p, size_t n, size_t first_max) {
    double tail = 0.0;
    for (size_t j = 0; j < n; j++)
        if (j != first_max) tail = tail + p[j];
    return tail;
}

/* A row's element steps in the widest vectors the products' path allows (isa.h), for the text
 * path: each element's operations are the same on every path; the sums across a row stay
 * sequential in the callers. */
/* p = p * kappa; bit 63 set when a scaled score is not finite */
#define SCALE_LOOP                                                                   \
    uint64_t any = 0;                                                                \
    for (size_t j = 0; j < n; j++) {                                                 \
        const double sc = p[j] * kappa;                                              \
        p[j] = sc;                                                                   \
        any |= pd_nonfinite_bit(sc);                                                 \
    }                                                                                \
    return any
/* the softmax VJP's element step: canon(p * (ds - wsum)) * kappa */
#define VJP_LOOP for (size_t j = 0; j < n; j++) ds[j] = pd_canon(p[j] * (ds[j] - wsum)) * kappa

typedef struct {
    uint64_t (*scale)(double *p, size_t n, double kappa);
    size_t (*shift)(double *p, size_t n, double mx);
    void (*divide)(double *p, size_t n, double den);
    void (*vjp)(double *ds, const double *p, size_t n, double wsum, double kappa);
} row_loops;

#define ROW_LOOPS(suffix, target)                                                                     \
    target static uint64_t scale##suffix(double *p, size_t n, double kappa) { SCALE_LOOP; }          \
    target static size_t shift##suffix(double *p, size_t n, double mx) { PD_SHIFT_BODY(p, p, n, mx); } \
    target static void divide##suffix(double *p, size_t n, double den) { PD_DIVIDE_BODY(p, n, den); }  \
    target static void vjp##suffix(double *ds, const double *p, size_t n, double wsum, double kappa) { \
        VJP_LOOP;                                                                                     \
    }                                                                                                 \
    static const row_loops loops##suffix = {scale##suffix, shift##suffix, divide##suffix, vjp##suffix};

PD_ISA_VARIANTS(ROW_LOOPS)

static const row_loops *current_loops(void) {
    return PD_ISA_PICK(&loops_baseline, &loops_avx2, &loops_avx512, &loops_neon);
}

/* One allowed range p[0, n): returns n, or the index of the first non-finite score. */
static size_t softmax_row(const row_loops *L, double *p, size_t n, double kappa, double *bad) {
    if (L->scale(p, n, kappa) >> 63) { /* multiply by 1/sqrt(D), not divide */
        size_t j = 0;
        while (isfinite(p[j])) j++; /* the first that is not, as a serial scan stops */
        *bad = p[j];
        return j;
    }
    double mx = -INFINITY;
    for (size_t j = 0; j < n; j++)
        if (p[j] > mx) mx = p[j];
    const size_t first_max = L->shift(p, n, mx); /* its exp is the literal 1, not in tail */
    pd_exp_array(n, p, p); /* the same exp(x - mx) the normalisation divides */
    L->divide(p, n, 1.0 + row_tail(p, n, first_max));
    return n;
}

/* Row i's entries outside [s, i] to +0.0 (the whole row when s > i). */
static void zero_outside(double *row, size_t T, size_t s, size_t i) {
    if (s > i) {
        memset(row, 0, T * sizeof(double));
        return;
    }
    if (s) memset(row, 0, s * sizeof(double));
    memset(row + i + 1, 0, (T - i - 1) * sizeof(double));
}

static int softmax_rows_scalar(const pd_attn_rows *r, double *w, size_t *bad_at, double *bad) {
    const row_loops *L = current_loops();
    for (size_t i = r->i0; i < r->i1; i++) {
        double *row = w + i * r->T;
        if (!r->valid[i]) {
            zero_outside(row, r->T, i + 1, i);
            continue;
        }
        const size_t s = r->s0[i], n = i + 1 - s, at = softmax_row(L, row + s, n, r->kappa, bad);
        if (at < n) {
            *bad_at = i * r->T + s + at;
            return 0;
        }
        zero_outside(row, r->T, s, i);
    }
    return 1;
}

#if PD_ARCH_X86_64
/* The lanes of group g (columns 8g..8g+7) that fall in [s, i]; none when s > i. */
static __mmask8 allowed(size_t g, size_t s, size_t i) {
    const size_t lo = 8 * g, hi = lo + 8;
    if (s > i || i < lo || s >= hi) return 0;
    const unsigned a = s > lo ? (unsigned)(s - lo) : 0u, b = i + 1 < hi ? (unsigned)(i + 1 - lo) : 8u;
    return (__mmask8)(((1u << b) - 1u) & ~((1u << a) - 1u));
}

/* The lowest set lane of a mask that has one. */
static size_t first_lane(unsigned m) {
    size_t l = 0;
    while (!(m & 1u)) m >>= 1, l++;
    return l;
}

/* The largest allowed s as the scan (mx = -inf; s > mx ? s : mx) finds it: the lanes' chains
 * keep their first maximum, and a zero maximum takes the sign of the row's first zero. */
PD_TARGET("avx512f") static double row_max(const double *p, size_t n, __m512d chains) {
    /* a tree of lane maxima: order-free but for a zero's sign, which the scan below settles */
    __m512d m = _mm512_max_pd(chains, _mm512_shuffle_f64x2(chains, chains, 0x4E));
    m = _mm512_max_pd(m, _mm512_shuffle_f64x2(m, m, 0xB1));
    m = _mm512_max_pd(m, _mm512_permute_pd(m, 0x55));
    const double mx = _mm512_cvtsd_f64(m);
    if (mx == 0.0)
        for (size_t j = 0; j < n; j++)
            if (p[j] == 0.0) return p[j];
    return mx;
}

/* The groups of row i that hold allowed keys: [*g0, return value), empty when s > i. */
static size_t live_groups(size_t s, size_t i, size_t *g0) {
    *g0 = s > i ? 0 : s / 8;
    return s > i ? 0 : i / 8 + 1;
}

/* Row i scaled in place (its allowed lanes checked and their max taken), then shifted; every
 * other lane +0.0. Returns the first maximal column, T + the bad column, or T for a row
 * without allowed keys. */
PD_TARGET("avx512f") static size_t scale_shift(double *row, size_t T, size_t s, size_t i, double kappa,
                                               double *bad) {
    const __m512d vk = _mm512_set1_pd(kappa), zero = _mm512_setzero_pd();
    const __m512i em = _mm512_set1_epi64(0x7FF0000000000000LL);
    __m512d chains = _mm512_set1_pd(-INFINITY);
    size_t g0;
    const size_t g1 = live_groups(s, i, &g0);
    for (size_t g = 0; g < T / 8; g++)
        if (g < g0 || g >= g1) _mm512_storeu_pd(row + 8 * g, zero);
    for (size_t g = g0; g < g1; g++) {
        const __mmask8 m = allowed(g, s, i);
        const __m512d sc = _mm512_mul_pd(_mm512_loadu_pd(row + 8 * g), vk);
        const __mmask8 nf = _mm512_mask_cmpeq_epi64_mask(m, _mm512_and_si512(_mm512_castpd_si512(sc), em), em);
        if (nf) {
            double t[8];
            _mm512_storeu_pd(t, sc);
            *bad = t[first_lane(nf)];
            return T + 8 * g + first_lane(nf);
        }
        _mm512_storeu_pd(row + 8 * g, _mm512_mask_blend_pd(m, zero, sc));
        chains = _mm512_mask_max_pd(chains, m, sc, chains); /* sc > chain ? sc : chain */
    }
    if (g1 == 0) return T;
    const __m512d vx = _mm512_set1_pd(row_max(row + s, i + 1 - s, chains));
    size_t first_max = T;
    for (size_t g = g0; g < g1; g++) {
        const __mmask8 m = allowed(g, s, i);
        const __m512d d = _mm512_maskz_sub_pd(m, _mm512_loadu_pd(row + 8 * g), vx);
        _mm512_storeu_pd(row + 8 * g, d);
        const __mmask8 z = _mm512_mask_cmp_pd_mask(m, d, zero, _CMP_EQ_OQ);
        if (z && first_max == T) first_max = 8 * g + first_lane(z);
    }
    return first_max;
}

/* Row i's exps divided by 1 + its tail, canonical, every other lane +0.0. */
PD_TARGET("avx512f") static void divide_row(double *row, size_t T, size_t s, size_t i, size_t first_max) {
    const __m512d zero = _mm512_setzero_pd();
    size_t g0;
    const size_t g1 = live_groups(s, i, &g0);
    const __m512d den = _mm512_set1_pd(g1 ? 1.0 + row_tail(row + s, i + 1 - s, first_max - s) : 1.0);
    for (size_t g = 0; g < T / 8; g++) {
        __m512d q = zero;
        if (g >= g0 && g < g1) {
            q = _mm512_maskz_div_pd(allowed(g, s, i), _mm512_loadu_pd(row + 8 * g), den);
            q = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(q, zero, _CMP_EQ_OQ), q, zero);
        }
        _mm512_storeu_pd(row + 8 * g, q);
    }
}

/* Whole rows of a T that is a multiple of 8: every row shifted, the exps, every row divided.
 * Short rows take one exp call for the whole block (their other lanes' exp(+0.0) is divided to
 * +0.0), longer ones one per row over its groups with keys. Up to 64 rows' first maxima are
 * kept on the stack; more go row by row. */
#define BLOCK_EXP_T 32
PD_TARGET("avx512f") static int softmax_rows_avx512(const pd_attn_rows *r, double *w, size_t *bad_at, double *bad) {
    const size_t T = r->T, rows = r->i1 - r->i0;
    if (T % 8 != 0 || rows > 64) return softmax_rows_scalar(r, w, bad_at, bad);
    size_t first_max[64];
    for (size_t i = r->i0; i < r->i1; i++) {
        const size_t s = r->valid[i] ? r->s0[i] : i + 1; /* an invalid row allows no key */
        const size_t fm = scale_shift(w + i * T, T, s, i, r->kappa, bad);
        if (fm > T) {
            *bad_at = i * T + fm - T;
            return 0;
        }
        first_max[i - r->i0] = fm;
    }
    if (T <= BLOCK_EXP_T) pd_exp_array(rows * T, w + r->i0 * T, w + r->i0 * T);
    for (size_t i = r->i0; i < r->i1; i++) {
        const size_t s = r->valid[i] ? r->s0[i] : i + 1;
        size_t g0;
        const size_t g1 = live_groups(s, i, &g0);
        if (T > BLOCK_EXP_T && g1) pd_exp_array(8 * (g1 - g0), w + i * T + 8 * g0, w + i * T + 8 * g0);
        divide_row(w + i * T, T, s, i, first_max[i - r->i0]);
    }
    return 1;
}
#endif

int pd_attn_softmax_rows(const pd_attn_rows *r, double *w, size_t *bad_at, double *bad) {
    return PD_ISA_PICK(softmax_rows_scalar, softmax_rows_scalar, softmax_rows_avx512, softmax_rows_scalar)(
        r, w, bad_at, bad);
}

static void softmax_vjp_rows_scalar(const pd_attn_rows *r, const double *w, double *ds) {
    const size_t T = r->T;
    const row_loops *L = current_loops();
    for (size_t i = r->i0; i < r->i1; i++) {
        double *d = ds + i * T;
        const double *p = w + i * T;
        const size_t s = r->valid[i] ? r->s0[i] : i + 1;
        double acc = 0.0;
        for (size_t j = s; j <= i; j++) acc = acc + d[j] * p[j];
        if (s <= i) L->vjp(d + s, p + s, i + 1 - s, acc, r->kappa);
        zero_outside(d, T, s, i);
    }
}

#if PD_ARCH_X86_64
/* Whole rows of a T that is a multiple of 8: the weighted sum's products eight at a time, added
 * in order; then every group at once, the lanes outside the keys written +0.0. */
PD_TARGET("avx512f") static void softmax_vjp_rows_avx512(const pd_attn_rows *r, const double *w, double *ds) {
    const size_t T = r->T;
    if (T % 8 != 0) {
        softmax_vjp_rows_scalar(r, w, ds);
        return;
    }
    const __m512d vk = _mm512_set1_pd(r->kappa), zero = _mm512_setzero_pd();
    for (size_t i = r->i0; i < r->i1; i++) {
        double *d = ds + i * T;
        const double *p = w + i * T;
        const size_t s = r->valid[i] ? r->s0[i] : i + 1;
        double acc = 0.0, t[8];
        for (size_t g = s / 8; s <= i && g <= i / 8; g++) {
            _mm512_storeu_pd(t, _mm512_mul_pd(_mm512_loadu_pd(d + 8 * g), _mm512_loadu_pd(p + 8 * g)));
            const size_t lo = s > 8 * g ? s - 8 * g : 0, hi = i + 1 < 8 * g + 8 ? i + 1 - 8 * g : 8;
            for (size_t l = lo; l < hi; l++) acc = acc + t[l];
        }
        const __m512d va = _mm512_set1_pd(acc);
        size_t g0;
        const size_t g1 = live_groups(s, i, &g0);
        for (size_t g = 0; g < T / 8; g++) {
            __m512d x = zero;
            if (g >= g0 && g < g1) {
                const __m512d y = _mm512_sub_pd(_mm512_loadu_pd(d + 8 * g), va);
                x = _mm512_maskz_mul_pd(allowed(g, s, i), _mm512_loadu_pd(p + 8 * g), y);
                x = _mm512_mul_pd(_mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, zero, _CMP_EQ_OQ), x, zero), vk);
            }
            _mm512_storeu_pd(d + 8 * g, x);
        }
    }
}
#endif

void pd_attn_softmax_vjp_rows(const pd_attn_rows *r, const double *w, double *ds) {
    PD_ISA_PICK(softmax_vjp_rows_scalar, softmax_vjp_rows_scalar, softmax_vjp_rows_avx512,
                softmax_vjp_rows_scalar)(r, w, ds);
}
