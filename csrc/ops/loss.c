/* SPDX-License-Identifier: MIT */
/* Valid-target mean NLL from the logits and its VJP (docs/numerics.md §5.7, §6.2). */
#include <math.h>
#include <stdlib.h>
#include "loss.h"
#include "canon.h"
#include "softmax_steps.h"
#include "../kernels/t8_avx512.h"
#include "../pd_nodes.h"
#include "../pd_tensor.h"
#include "../kernels/isa.h"
#include "../kernels/pool.h"
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#elif PD_ARCH_AARCH64
#include <arm_neon.h>
#endif
#include "../libm/pd_libm.h"

typedef struct {
    size_t V;
    const double *logits;
    const int64_t *tgt;
    const uint8_t *valid;
    double *prob, *per_target, *sm_term, dn;
    uint8_t *bad; /* rows holding a non-finite logit */
} nll_ctx;

/* The largest logit as the sequential scan (mx = -inf; x > mx ? x : mx) finds it, from eight
 * interleaved chains: the maximum is order-free except for its zero's sign, which is the
 * first zero's. 0 when the row holds a non-finite logit. chains() runs the chains over the
 * whole groups of eight. */
#define MAX_LOOP(chains)                                                            \
    double m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,                      \
                   -INFINITY, -INFINITY, -INFINITY, -INFINITY};                     \
    uint64_t any = 0;                                                               \
    size_t cl = chains(x, V, m, &any);                                              \
    for (; cl < V; cl++) {                                                          \
        any |= pd_nonfinite_bit(x[cl]);                                             \
        m[0] = x[cl] > m[0] ? x[cl] : m[0];                                         \
    }                                                                               \
    if (any >> 63) return 0;                                                        \
    double mx = m[0];                                                               \
    for (int l = 1; l < 8; l++)                                                     \
        if (m[l] > mx) mx = m[l];                                                   \
    if (mx == 0.0)                                                                  \
        for (cl = 0; cl < V; cl++)                                                  \
            if (x[cl] == 0.0) { mx = x[cl]; break; }                                \
    *out = mx;                                                                      \
    return 1
static size_t chains_baseline(const double *x, size_t V, double *m, uint64_t *any) {
    size_t cl = 0;
    for (; cl + 8 <= V; cl += 8)
        for (int l = 0; l < 8; l++) {
            *any |= pd_nonfinite_bit(x[cl + l]);
            m[l] = x[cl + l] > m[l] ? x[cl + l] : m[l];
        }
    return cl;
}
#if PD_ARCH_X86_64
/* maxpd(v, m) is v > m ? v : m lane by lane, the scalar chains' step (GCC does not form it
 * from the conditional without finite-math flags) */
#define CHAINS_VECTOR(VEC, IVEC, W, load, store, storei, set1, and_, or_, add, max, cast)  \
    size_t cl = 0;                                                                  \
    VEC mv[8 / W];                                                                  \
    IVEC av = set1(0);                                                              \
    const IVEC em = set1(0x7FF0000000000000LL), lo = set1(0x0010000000000000LL);    \
    for (int h = 0; h < 8 / W; h++) mv[h] = load(m + h * W);                        \
    for (; cl + 8 <= V; cl += 8)                                                    \
        for (int h = 0; h < 8 / W; h++) {                                           \
            const VEC v = load(x + cl + h * W);                                     \
            av = or_(av, add(and_(cast(v), em), lo));                               \
            mv[h] = max(v, mv[h]);                                                  \
        }                                                                           \
    uint64_t a[W];                                                                  \
    storei((void *)a, av);                                                          \
    for (int l = 0; l < W; l++) *any |= a[l];                                       \
    for (int h = 0; h < 8 / W; h++) store(m + h * W, mv[h]);                        \
    return cl
PD_TARGET("avx2") static size_t chains_avx2(const double *x, size_t V, double *m, uint64_t *any) {
    CHAINS_VECTOR(__m256d, __m256i, 4, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_storeu_si256,
                  _mm256_set1_epi64x, _mm256_and_si256, _mm256_or_si256, _mm256_add_epi64,
                  _mm256_max_pd, _mm256_castpd_si256);
}
PD_TARGET("avx512f") static size_t chains_avx512(const double *x, size_t V, double *m, uint64_t *any) {
    CHAINS_VECTOR(__m512d, __m512i, 8, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_storeu_si512,
                  _mm512_set1_epi64, _mm512_and_si512, _mm512_or_si512, _mm512_add_epi64,
                  _mm512_max_pd, _mm512_castpd_si512);
}
#elif PD_ARCH_AARCH64
/* The scalar chains' step x > m ? x : m as a compare and a select (fmax would turn a -0 chain
 * into +0), four two-lane chains at a time */
static size_t chains_neon(const double *x, size_t V, double *m, uint64_t *any) {
    size_t cl = 0;
    float64x2_t mv[4];
    uint64x2_t av = vdupq_n_u64(0);
    const uint64x2_t em = vdupq_n_u64(0x7FF0000000000000u), lo = vdupq_n_u64(0x0010000000000000u);
    for (int h = 0; h < 4; h++) mv[h] = vld1q_f64(m + 2 * h);
    for (; cl + 8 <= V; cl += 8)
        for (int h = 0; h < 4; h++) {
            const float64x2_t v = vld1q_f64(x + cl + 2 * h);
            av = vorrq_u64(av, vaddq_u64(vandq_u64(vreinterpretq_u64_f64(v), em), lo));
            mv[h] = vbslq_f64(vcgtq_f64(v, mv[h]), v, mv[h]);
        }
    *any |= vgetq_lane_u64(av, 0) | vgetq_lane_u64(av, 1);
    for (int h = 0; h < 4; h++) vst1q_f64(m + 2 * h, mv[h]);
    return cl;
}
#endif
/* d = canon(p * scale); d may be p */
#define SCALE_LOOP for (size_t cl = 0; cl < V; cl++) d[cl] = pd_canon(p[cl] * scale)

/* A row's element loops, in the widest vectors the products' path allows (isa.h): the same
 * operations per element on every path. */
#define GROUP 16 /* rows whose sequential tail sums run interleaved */

/* t[l] = the sum of tp[l][0..V) ascending from +0.0, l < GROUP, the rows' chains interleaved:
 * each row's own order is the serial one. */
#define TAIL_LOOP                                                                    \
    for (int l = 0; l < GROUP; l++) t[l] = 0.0;                                      \
    for (size_t cl = 0; cl < V; cl++)                                                \
        for (int l = 0; l < GROUP; l++) t[l] = t[l] + tp[l][cl]

typedef struct {
    int (*max)(const double *x, size_t V, double *out);
    /* the tails of the first n of GROUP rows (the others' sums may be skipped) */
    void (*tails)(const double *const *tp, size_t n, size_t V, double *t);
    void (*divide)(double *p, size_t V, double den);
    void (*scale)(const double *p, size_t V, double scale, double *d);
} row_loops;

#if PD_ARCH_X86_64
/* The tails on AVX-512: eight rows in the lanes of one vector (8 x 8 blocks transposed in
 * registers), two such vectors side by side, so a row's chain of adds no longer waits on itself
 * and each add serves eight rows. Lanes past V read +0.0, which leaves a sum of terms >= +0.0
 * unchanged. */
PD_TARGET("avx512f") static void tails_avx512(const double *const *tp, size_t n, size_t V, double *t) {
    if (n <= 4) { /* four scalar chains keep the adders busy for so few rows; the transposes cost more */
        double s[4] = {0.0, 0.0, 0.0, 0.0};
        for (size_t cl = 0; cl < V; cl++)
            for (int l = 0; l < 4; l++) s[l] = s[l] + tp[l][cl];
        for (int l = 0; l < 4; l++) t[l] = s[l];
        return;
    }
    __m512d acc[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
    const int vecs = n > 8 ? 2 : 1; /* rows past n repeat a live one: their sums are unused */
    for (size_t cl = 0; cl < V; cl += 8) {
        const __mmask8 m = V - cl >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (V - cl)) - 1);
        const int k = V - cl >= 8 ? 8 : (int)(V - cl);
        for (int h = 0; h < vecs; h++) {
            __m512d r[8], c[8];
            for (int l = 0; l < 8; l++) r[l] = _mm512_maskz_loadu_pd(m, tp[8 * h + l] + cl);
            pd_t8_avx512(r, c);
            for (int j = 0; j < k; j++) acc[h] = _mm512_add_pd(acc[h], c[j]);
        }
    }
    _mm512_storeu_pd(t, acc[0]);
    _mm512_storeu_pd(t + 8, acc[1]);
}
#endif
/* each path's tails: AVX-512's own loop, the interleaved scalar text elsewhere */
#define TAILS_baseline tails_loop_baseline
#define TAILS_avx2 tails_loop_avx2
#define TAILS_avx512 tails_avx512
#define TAILS_neon tails_loop_neon

#define ROW_LOOPS(suffix, target)                                                                 \
    target static int row_max##suffix(const double *x, size_t V, double *out) {                  \
        MAX_LOOP(chains##suffix);                                                                 \
    }                                                                                             \
    PD_MAYBE_UNUSED target static void tails_loop##suffix(const double *const *tp, size_t n, size_t V,  \
                                                    double *t) {                                  \
        (void)n; /* every GROUP chain runs: a constant count keeps them in registers */           \
        TAIL_LOOP;                                                                                \
    }                                                                                             \
    target static void row_divide##suffix(double *p, size_t V, double den) { PD_DIVIDE_BODY(p, V, den); } \
    target static void row_scale##suffix(const double *p, size_t V, double scale, double *d) {   \
        SCALE_LOOP;                                                                               \
    }                                                                                             \
    static const row_loops loops##suffix = {row_max##suffix, TAILS##suffix, row_divide##suffix,    \
                                            row_scale##suffix};

PD_ISA_VARIANTS(ROW_LOOPS)

static const row_loops *current_loops(void) {
    return PD_ISA_PICK(&loops_baseline, &loops_avx2, &loops_avx512, &loops_neon);
}

/* Rows are independent; the cross-row sums stay sequential in the caller. */
static void nll_rows(void *vctx, size_t begin, size_t end) {
    nll_ctx *c = vctx;
    const size_t V = c->V;
    const double dn = c->dn;
    const row_loops *L = current_loops();
    for (size_t g0 = begin; g0 < end; g0 += GROUP) {
        const size_t rows = end - g0 < GROUP ? end - g0 : GROUP;
        double mxs[GROUP], tail[GROUP], lead[GROUP], xts[GROUP];
        size_t first_max[GROUP];
        const double *tp[GROUP]; /* rows to sum; missing or skipped rows repeat a live one */
        size_t live = 0;
        for (size_t r = 0; r < rows; r++) {
            const size_t g = g0 + r;
            const double *x = c->logits + g * V;
            double *p = c->prob + g * V;
            c->per_target[g] = 0.0;
            c->sm_term[g] = 0.0;
            c->bad[g] = 0;
            first_max[r] = V;
            if (c->valid && !c->valid[g]) {
                for (size_t cl = 0; cl < V; cl++) p[cl] = 0.0;
                continue;
            }
            if (!L->max(x, V, &mxs[r])) {
                c->bad[g] = 1;
                continue;
            }
            xts[r] = x[c->tgt[g]]; /* read before the row is shifted: prob may be the logits */
            /* exp(x - mx) in one sweep; the first zero shift's exp, the literal 1, stays out of tail */
            const size_t fm = pd_exp_shifted_array(V, x, mxs[r], p);
            first_max[r] = fm;
            if (fm == V) continue; /* no zero shift: only a row without logits (V == 0) */
            lead[r] = p[fm];
            p[fm] = 0.0; /* every term is >= +0.0, so adding +0.0 is leaving it out */
            tp[live++] = p;
        }
        if (!live) continue;
        for (size_t l = live; l < GROUP; l++) tp[l] = tp[0];
        double t[GROUP];
        L->tails(tp, live, V, t);
        for (size_t r = 0, l = 0; r < rows; r++) tail[r] = first_max[r] < V ? t[l++] : 0.0;
        for (size_t r = 0; r < rows; r++) {
            if (first_max[r] == V) continue;
            const size_t g = g0 + r;
            double *p = c->prob + g * V;
            p[first_max[r]] = lead[r];
            const double mx = mxs[r];
            const double lse = pd_log1p(tail[r]); /* log1p of the tail, not log(1 + tail) */
            const double xt = xts[r];
            const double gap = mx - xt;
            c->per_target[g] = gap + lse;
            const double sg = isfinite(gap) ? gap / dn : mx / dn - xt / dn;
            c->sm_term[g] = sg + lse / dn;
            L->divide(p, V, 1.0 + tail[r]);
        }
    }
}

pd_status pd_nll_forward(const pd_nll_targets *t, const double *logits, double *prob,
                         double *per_target, double *loss, size_t *count, pd_error *e) {
    const size_t N = t->N, V = t->V;
    const int64_t *tgt = t->tgt;
    const uint8_t *valid = t->valid;
    size_t n = 0;
    for (size_t g = 0; g < N; g++)
        if (!valid || valid[g]) n++;
    if (n == 0) return pd_fail(e, PD_ERR_EMPTY, 0, 0.0, -1, PD_N_LOSS);
    double *sm_term = malloc(N * sizeof(double));
    uint8_t *bad = malloc(N);
    if (!sm_term || !bad) {
        free(sm_term);
        free(bad);
        return pd_fail(e, PD_ERR_ALLOC, 0, 0.0, -1, PD_N_LOSS);
    }
    nll_ctx c = {V, logits, tgt, valid, prob, per_target, sm_term, (double)n, bad};
    pd_parallel_for(N, 1 + 16384 / (V ? V : 1), nll_rows, &c);
    double total = 0.0, sm = 0.0;
    int total_ok = 1;
    for (size_t g = 0; g < N; g++) {
        if (valid && !valid[g]) continue;
        if (bad[g]) { /* the first non-finite logit in row order */
            size_t cl = 0;
            while (isfinite(logits[g * V + cl])) cl++;
            const double v = logits[g * V + cl];
            free(sm_term);
            free(bad);
            return pd_fail(e, PD_ERR_NONFINITE, g * V + cl, v, -1, PD_N_LOGITS);
        }
        const double lg = per_target[g];
        sm = sm + sm_term[g];
        if (total_ok) {
            if (!isfinite(lg)) total_ok = 0;
            else {
                total = total + lg;
                if (!isfinite(total)) total_ok = 0;
            }
        }
    }
    free(sm_term);
    free(bad);
    double out = total_ok ? pd_canon(total / (double)n) : pd_canon(sm);
    if (!isfinite(out)) return pd_fail(e, PD_ERR_NONFINITE, 0, out, -1, PD_N_LOSS);
    *loss = out;
    *count = n;
    return PD_OK;
}

typedef struct {
    size_t V;
    const double *prob;
    const int64_t *tgt;
    const uint8_t *valid;
    double scale, *dlog;
} nll_back_ctx;

static void nll_back_rows(void *vctx, size_t begin, size_t end) {
    nll_back_ctx *c = vctx;
    const size_t V = c->V;
    const row_loops *L = current_loops();
    for (size_t g = begin; g < end; g++) {
        double *d = c->dlog + g * V;
        const double *p = c->prob + g * V;
        if (c->valid && !c->valid[g]) {
            for (size_t cl = 0; cl < V; cl++) d[cl] = 0.0;
            continue;
        }
        const size_t t = (size_t)c->tgt[g]; /* the subtraction happens only at the target */
        const double pt = p[t];              /* read first: dlog may overwrite prob in place */
        L->scale(p, V, c->scale, d);
        d[t] = pd_canon((pt - 1.0) * c->scale);
    }
}

void pd_nll_backward(const pd_nll_targets *t, const double *prob, size_t count, double *dlog) {
    const size_t V = t->V;
    nll_back_ctx c = {V, prob, t->tgt, t->valid, 1.0 / (double)count, dlog}; /* multiplies by 1/N */
    pd_parallel_for(t->N, 1 + 16384 / (V ? V : 1), nll_back_rows, &c);
}
