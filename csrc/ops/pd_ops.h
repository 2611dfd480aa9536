/* One forward and one vector-Jacobian product per operation, over flat row-major buffers.
 * Rows are positions rho = b*T + t; invalid rows are skipped and left at +0.0. */
#ifndef PD_OPS_H
#define PD_OPS_H
#include <stddef.h>
#include <stdint.h>
#include "../pd_error.h"

static inline double pd_canon(double v) { return v == 0.0 ? 0.0 : v; }

/* RMSNorm: m = mean(x*x), z = m + eps, r = exp(-0.5*log z), n = x*r, o = n*g. */
pd_status pd_rmsnorm_forward(size_t R, size_t W, const double *x, const double *g, double eps,
                             const uint8_t *valid, double *m, double *z, double *r, double *n,
                             double *o, int block, int node, pd_error *e);
/* out = (((0 + res) + u*g*r) + u_s*x) + u_s*x  (res may be NULL: the final norm's input);
 * dg[w] = flat sum over rows of u*n. cap_* (may be NULL) receive adjoints of n, r and m. */
void pd_rmsnorm_backward(size_t R, size_t W, const double *u, const double *x, const double *g,
                         const double *z, const double *r, const double *n, const uint8_t *valid,
                         const double *res, double *out, double *dg,
                         double *cap_n, double *cap_r, double *cap_m);

/* RoPE tables [P, D/2]. */
pd_status pd_rope_tables(size_t P, size_t D, double base, double *sin_t, double *cos_t, pd_error *e);
/* Rotates heads [B, Hn, T, D] by positions pos[b*T+t]; inverse applies the VJP rotation. */
void pd_rope_apply(size_t B, size_t Hn, size_t T, size_t D, const size_t *pos,
                   const double *sin_t, const double *cos_t, const double *in, double *out,
                   int inverse);

/* Splits [B,T,Hn*D] rows into heads [B,Hn,T,D] and back. */
void pd_split_heads(size_t B, size_t T, size_t Hn, size_t D, const double *x, double *heads);
void pd_merge_heads(size_t B, size_t T, size_t Hn, size_t D, const double *heads, double *x);

typedef struct {
    size_t B, T, H, KV, D;
    const uint8_t *valid;
    const size_t *seg_start, *seg_end;
} pd_attn_geom;

/* Scores, segment-causal softmax (weights pm [B,H,T,T]) and mixing (ho [B,H,T,D]). */
pd_status pd_attention_forward(const pd_attn_geom *a, const double *qr, const double *kr,
                               const double *vh, double *pm, double *ho, int block, pd_error *e);
/* dO [B,H,T,D] -> dql [B,H,T,D], dkr and dvh [B,KV,T,D] (query heads of a group summed in
 * query-head order). Fails only when scratch cannot be allocated. */
pd_status pd_attention_backward(const pd_attn_geom *a, const double *qr, const double *kr,
                                const double *vh, const double *pm, const double *dO, double *dql,
                                double *dkr, double *dvh, pd_error *e);

/* SiLU: sg (sigmoid, kept for the reverse pass) and out = x*sg. */
void pd_silu_forward(size_t n, const double *x, double *sg, double *out);
/* out = a + b and out = a * b, elementwise. */
void pd_add_vec(size_t n, const double *a, const double *b, double *out);
void pd_mul_vec(size_t n, const double *a, const double *b, double *out);
/* d_gs = d_pr*up, d_up = d_pr*gs, d_gl = d_gs*(sg*(1 + gl*(1 - sg))). */
void pd_swiglu_backward(size_t n, const double *d_pr, const double *up, const double *gs,
                        const double *sg, const double *gl, double *d_gs, double *d_up,
                        double *d_gl);

/* Valid-target mean NLL from logits [N, V]; prob receives the saved softmax and per_target
 * each valid group's NLL (+0.0 where invalid). */
pd_status pd_nll_forward(size_t N, size_t V, const double *logits, const int64_t *tgt,
                         const uint8_t *valid, double *prob, double *per_target, double *loss,
                         size_t *count, pd_error *e);
void pd_nll_backward(size_t N, size_t V, const double *prob, const int64_t *tgt,
                     const uint8_t *valid, size_t count, double *dlog);

/* Row gather x[rho,:] = E[ids[rho],:] and its scatter-add VJP (repeated ids pre-summed). */
void pd_embedding_forward(size_t N, size_t W, const double *E, const int64_t *ids,
                          const uint8_t *valid, double *x);
void pd_embedding_backward(size_t N, size_t W, const double *u, const int64_t *ids,
                           const uint8_t *valid, double *dE);

#endif
