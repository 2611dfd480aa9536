/* SPDX-License-Identifier: MIT */
/* RMSNorm forward and VJP, rows on the pool (docs/numerics.md §5.1, §6.2). */
#include <math.h>
#include "rmsnorm.h"
#include "../kernels/isa.h"
#include "../kernels/pool.h"
#include "../libm/pd_libm.h"
#include "../pd_tensor.h"
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#endif

/* The per-element loops of a row, in the widest vectors the products' path allows (isa.h);
 * each element's operations are the same on every path, and no loop here sums across a row. */
#define SCALE_LOOP                                                                   \
    uint64_t any = 0;                                                                \
    for (size_t w = 0; w < W; w++) {                                                 \
        const double nv = xr[w] * rr;                                                \
        const double ov = nv * g[w];                                                 \
        nr[w] = nv;                                                                  \
        orow[w] = ov;                                                                \
        any |= pd_nonfinite_bit(nv) | pd_nonfinite_bit(ov);                          \
    }                                                                                \
    return any
/* out = (((0 + res) + c_n) + c_s) + c_s with c_n = (u g) r, c_s = u_s x (MUL(x, x): two c_s) */
#define BACK_LOOP(acc0)                                                              \
    for (size_t w = 0; w < W; w++) {                                                 \
        const double c_n = (ur[w] * g[w]) * rr;                                      \
        const double c_s = u_s * xr[w];                                              \
        double acc = acc0;                                                           \
        acc = acc + c_n;                                                             \
        acc = acc + c_s;                                                             \
        outr[w] = acc + c_s;                                                         \
    }
#define BACK_ROW_LOOP                                                                \
    if (res) { BACK_LOOP(0.0 + res[w]) }                                             \
    else { BACK_LOOP(0.0) }
/* the gain's columns from +0.0, every counted row's terms in row order: dg[w] = dg[w] + u[w] n[w] */
#define GAIN_LOOP                                                                    \
    for (size_t w = 0; w < n; w++) dg[w] = 0.0;                                      \
    for (size_t row = 0; row < R; row++) {                                           \
        if (valid && !valid[row]) continue;                                          \
        const double *ur = u + row * W, *nr = nrm + row * W;                         \
        for (size_t w = 0; w < n; w++) dg[w] = dg[w] + ur[w] * nr[w];                \
    }

typedef struct {
    /* n = x r, o = n g; bit 63 set when any n or o is not finite */
    uint64_t (*scale)(size_t W, const double *xr, double rr, const double *g, double *nr, double *orow);
    /* one valid row of the VJP's output (res may be NULL) */
    void (*back)(size_t W, const double *ur, const double *xr, const double *g, double rr,
                 double u_s, const double *res, double *outr);
    /* the gain gradient's columns [0, n) of rows W apart from +0.0, every counted row in order */
    void (*gain)(size_t n, size_t R, size_t W, const double *u, const double *nrm, const uint8_t *valid,
                 double *dg);
} row_loops;

#if PD_ARCH_X86_64
/* GAIN_LOOP on AVX-512 with the columns' sums kept in registers across the rows (a sum stored
 * and reloaded per row waited on its own store): 64 columns in eight registers, then the rest
 * sixteen at a time, the last ones masked. Each column still adds its rows in order from +0.0. */
PD_TARGET("avx512f") static void gain_blocks_avx512(size_t n, size_t R, size_t W, const double *u,
                                                    const double *nrm, const uint8_t *valid, double *dg) {
    size_t w0 = 0;
    for (; w0 + 64 <= n; w0 += 64) {
        __m512d a[8];
        for (int k = 0; k < 8; k++) a[k] = _mm512_setzero_pd();
        for (size_t row = 0; row < R; row++) {
            if (valid && !valid[row]) continue;
            const double *ur = u + row * W + w0, *nr = nrm + row * W + w0;
            for (int k = 0; k < 8; k++)
                a[k] = _mm512_add_pd(a[k], _mm512_mul_pd(_mm512_loadu_pd(ur + 8 * k), _mm512_loadu_pd(nr + 8 * k)));
        }
        for (int k = 0; k < 8; k++) _mm512_storeu_pd(dg + w0 + 8 * k, a[k]);
    }
    for (; w0 < n; w0 += 16) {
        const size_t m = n - w0 < 16 ? n - w0 : 16;
        const __mmask8 k0 = m >= 8 ? (__mmask8)0xff : (__mmask8)((1u << m) - 1);
        const __mmask8 k1 = m >= 16 ? (__mmask8)0xff : m > 8 ? (__mmask8)((1u << (m - 8)) - 1) : (__mmask8)0;
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(); /* the sums' +0.0 */
        for (size_t row = 0; row < R; row++) {
            if (valid && !valid[row]) continue;
            const double *ur = u + row * W + w0, *nr = nrm + row * W + w0;
            a0 = _mm512_add_pd(a0, _mm512_mul_pd(_mm512_maskz_loadu_pd(k0, ur), _mm512_maskz_loadu_pd(k0, nr)));
            a1 = _mm512_add_pd(a1, _mm512_mul_pd(_mm512_maskz_loadu_pd(k1, ur + 8), _mm512_maskz_loadu_pd(k1, nr + 8)));
        }
        _mm512_mask_storeu_pd(dg + w0, k0, a0);
        _mm512_mask_storeu_pd(dg + w0 + 8, k1, a1);
    }
}
#endif
/* each path's gain loop: AVX-512's register blocks, the text elsewhere */
#define GAIN_baseline gain_baseline
#define GAIN_avx2 gain_avx2
#define GAIN_avx512 gain_blocks_avx512
#define GAIN_neon gain_neon

#define ROW_LOOPS(suffix, target)                                                                   \
    target static uint64_t scale##suffix(size_t W, const double *xr, double rr, const double *g,   \
                                         double *nr, double *orow) {                                \
        SCALE_LOOP;                                                                                 \
    }                                                                                               \
    target static void back##suffix(size_t W, const double *ur, const double *xr, const double *g, \
                                    double rr, double u_s, const double *res, double *outr) {      \
        BACK_ROW_LOOP                                                                               \
    }                                                                                               \
    PD_MAYBE_UNUSED target static void gain##suffix(size_t n, size_t R, size_t W, const double *restrict u, \
                                    const double *restrict nrm, const uint8_t *valid,               \
                                    double *restrict dg) {                                          \
        GAIN_LOOP                                                                                   \
    }                                                                                               \
    static const row_loops loops##suffix = {scale##suffix, back##suffix, GAIN##suffix};

PD_ISA_VARIANTS(ROW_LOOPS)

static const row_loops *current_loops(void) {
    return PD_ISA_PICK(&loops_baseline, &loops_avx2, &loops_avx512, &loops_neon);
}

typedef struct {
    const pd_norm_geom *geom;
    const double *x, *g, *u; /* input, gain, and (VJP) the adjoint of the output */
    const pd_norm_rec *rec;
    const pd_norm_grads *d;  /* VJP only */
    int block, node;         /* forward only: what a failure names */
    int failed;
} rms_ctx;

/* Rows summed side by side: each row's sum is one chain of dependent adds, so a single row
 * leaves the adder waiting on its own latency. */
#define RMS_GROUP 8

/* s[j] = the left-to-right sum over w of f(row j) for the n rows at x, their chains interleaved;
 * each row's own order is the serial one. */
#define GROUP_LOOP(N, TERM)                                                          \
    for (size_t j = 0; j < (N); j++) s[j] = 0.0;                                     \
    for (size_t w = 0; w < W; w++)                                                   \
        for (size_t j = 0; j < (N); j++) s[j] = s[j] + (TERM)
/* a whole group with a constant count, so its chains unroll into registers */
#define GROUP_SUMS(TERM)                                                             \
    if (n == RMS_GROUP) {                                                            \
        GROUP_LOOP(RMS_GROUP, TERM);                                                 \
    } else {                                                                         \
        GROUP_LOOP(n, TERM);                                                         \
    }

static void square_sums(const double *x, size_t W, size_t n, double *s) {
    GROUP_SUMS(x[j * W + w] * x[j * W + w]);
}

/* The inverse roots r = exp(log(m + eps) * -0.5) of a group, one array exp for all of it
 * (pd_exp_array gives pd_exp's bits); rows whose m or z fails get 0.0, never read. */
static void group_roots(const double *s, size_t n, double dw, double eps, double *ms, double *zz,
                        double *lg, double *rr) {
    double y[RMS_GROUP];
    for (size_t j = 0; j < n; j++) {
        ms[j] = s[j] / dw; /* a division by W, not a reciprocal multiply */
        zz[j] = ms[j] + eps;
        lg[j] = isfinite(ms[j]) && zz[j] != 0.0 ? pd_log(zz[j]) : 0.0;
        y[j] = lg[j] * -0.5;
    }
    pd_exp_array(n, y, rr);
}

/* Rows [r0, r1) of the forward; stops at the first failing row like the serial loop. */
static pd_status rms_rows(const rms_ctx *c, size_t r0, size_t r1, pd_error *e) {
    const size_t W = c->geom->W;
    const double dw = (double)W, eps = c->geom->eps, *x = c->x, *g = c->g;
    const uint8_t *valid = c->geom->valid;
    const pd_norm_rec *rec = c->rec;
    const int block = c->block, node = c->node;
    const row_loops *L = current_loops();
    double s[RMS_GROUP], ms[RMS_GROUP], zz[RMS_GROUP], lg[RMS_GROUP], rr[RMS_GROUP];
    for (size_t r = r0; r < r1; r += RMS_GROUP) {
        const size_t n = r1 - r < RMS_GROUP ? r1 - r : RMS_GROUP;
        square_sums(x + r * W, W, n, s);
        group_roots(s, n, dw, eps, ms, zz, lg, rr);
        for (size_t j = 0, row = r; j < n; j++, row++) {
            const double *xr = x + row * W;
            double *nr = rec->normalized + row * W, *orow = rec->out + row * W;
            if (valid && !valid[row]) {
                rec->mean_square[row] = rec->shifted[row] = rec->inverse_rms[row] = 0.0;
                for (size_t w = 0; w < W; w++) nr[w] = orow[w] = 0.0;
                continue;
            }
            if (!isfinite(ms[j])) return pd_fail(e, PD_ERR_NONFINITE, row, ms[j], block, node);
            if (zz[j] == 0.0) return pd_fail(e, PD_ERR_ZERO_MEAN_SQUARE, row, ms[j], block, node);
            if (!isfinite(lg[j]) || !isfinite(rr[j])) return pd_fail(e, PD_ERR_NONFINITE, row, rr[j], block, node);
            rec->mean_square[row] = ms[j];
            rec->shifted[row] = zz[j];
            rec->inverse_rms[row] = rr[j];
            if (!(L->scale(W, xr, rr[j], g, nr, orow) >> 63)) continue;
            for (size_t w = 0; w < W; w++) /* the first offending element, as the serial loop finds it */
                if (!isfinite(orow[w]) || !isfinite(nr[w]))
                    return pd_fail(e, PD_ERR_NONFINITE, row * W + w, orow[w], block, node);
        }
    }
    return PD_OK;
}

static void rms_fwd_task(void *vctx, size_t begin, size_t end) {
    rms_ctx *c = vctx;
    if (rms_rows(c, begin, end, NULL) != PD_OK) c->failed = 1;
}

static size_t row_grain(size_t W) { return 1 + 8192 / (W ? W : 1); }

pd_status pd_rmsnorm_forward(const pd_norm_geom *geom, const double *x, const double *g,
                             const pd_norm_rec *rec, int block, int node, pd_error *e) {
    rms_ctx c = {.geom = geom, .x = x, .g = g, .rec = rec, .block = block, .node = node};
    pd_parallel_for(geom->R, row_grain(geom->W), rms_fwd_task, &c);
    /* rows are independent: a failure is reported exactly as the serial pass reports it */
    if (c.failed) return rms_rows(&c, 0, geom->R, e);
    return PD_OK;
}

static void adjoint_sums(const double *u, const double *g, const double *x, size_t W, size_t n, double *s) {
    GROUP_SUMS((u[j * W + w] * g[w]) * x[j * W + w]);
}

/* The scalar chain of each row of a group, u_z = ((q r) * -0.5) / z and u_s = u_z / W, for all
 * of it before any row's element loop: its two divisions per row then overlap across the rows
 * instead of waiting on each other. Invalid rows get values never read. */
static void group_adjoints(const rms_ctx *c, size_t r, size_t n, const double *q, double *u_z, double *u_s) {
    const double *rr = c->rec->inverse_rms + r, *z = c->rec->shifted + r, dw = (double)c->geom->W;
    for (size_t j = 0; j < n; j++) {
        const double u_y = q[j] * rr[j];
        const double u_lg = u_y * -0.5;
        u_z[j] = u_lg / z[j];
        u_s[j] = u_z[j] / dw;
    }
}

/* One row of the VJP from its sum q = flat sum over w of (u g) x and the adjoints u_z, u_s
 * group_adjoints made from it. */
static void back_row(const rms_ctx *c, const row_loops *L, size_t row, double q, double u_z, double u_s) {
    const size_t W = c->geom->W;
    const pd_norm_grads *d = c->d;
    const double *ur = c->u + row * W, *xr = c->x + row * W, *g = c->g;
    const double *res = d->res ? d->res + row * W : NULL;
    double *outr = d->out + row * W;
    if (c->geom->valid && !c->geom->valid[row]) {
        for (size_t w = 0; w < W; w++) {
            outr[w] = res ? 0.0 + res[w] : 0.0;
            if (d->cap_n) d->cap_n[row * W + w] = 0.0;
        }
        if (d->cap_r) d->cap_r[row] = 0.0;
        if (d->cap_m) d->cap_m[row] = 0.0;
        return;
    }
    if (d->cap_r) d->cap_r[row] = 0.0 + q;
    if (d->cap_m) d->cap_m[row] = 0.0 + u_z;
    L->back(W, ur, xr, g, c->rec->inverse_rms[row], u_s, res, outr);
    if (d->cap_n)
        for (size_t w = 0; w < W; w++) d->cap_n[row * W + w] = 0.0 + ur[w] * g[w];
}

static void rms_back_rows(void *vctx, size_t begin, size_t end) {
    const rms_ctx *c = vctx;
    const size_t W = c->geom->W;
    const row_loops *L = current_loops();
    double s[RMS_GROUP], u_z[RMS_GROUP], u_s[RMS_GROUP];
    for (size_t r = begin; r < end; r += RMS_GROUP) {
        const size_t n = end - r < RMS_GROUP ? end - r : RMS_GROUP;
        adjoint_sums(c->u + r * W, c->g, c->x + r * W, W, n, s);
        group_adjoints(c, r, n, s, u_z, u_s);
        for (size_t j = 0; j < n; j++) back_row(c, L, r + j, s[j], u_z[j], u_s[j]);
    }
}

/* gain: one flat sum over all rows in row order, per column (columns are independent) */
static void rms_back_gain(void *vctx, size_t begin, size_t end) {
    const rms_ctx *c = vctx;
    const size_t W = c->geom->W, R = c->geom->R;
    const uint8_t *valid = c->geom->valid;
    double *dg = c->d->dgain;
    const row_loops *L = current_loops();
    L->gain(end - begin, R, W, c->u + begin, c->rec->normalized + begin, valid, dg + begin);
}

void pd_rmsnorm_backward(const pd_norm_geom *geom, const double *u, const double *x, const double *g,
                         const pd_norm_rec *rec, const pd_norm_grads *d) {
    rms_ctx c = {.geom = geom, .x = x, .g = g, .u = u, .rec = rec, .d = d};
    const size_t R = geom->R;
    pd_parallel_for(R, row_grain(geom->W), rms_back_rows, &c);
    /* each column sums every row, half of which the other thread just wrote: split only when
     * the sums are long (benchmarks/KERNELS.md has the measurement) */
    pd_parallel_for(geom->W, 1 + 32768 / (R ? R : 1) + 7, rms_back_gain, &c);
}
