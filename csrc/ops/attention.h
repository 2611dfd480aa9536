/* SPDX-License-Identifier: MIT */
/* Segment-causal attention forward and VJP over head lanes (ops/attention.c). */
#ifndef PD_OPS_ATTENTION_H
#define PD_OPS_ATTENTION_H
#include <stddef.h>
#include <stdint.h>
#include "../pd_error.h"

typedef struct {
    size_t B, T, H, KV, D;
    const uint8_t *valid;
    const size_t *seg_start, *seg_end;
} pd_attn_geom;

/* Attention's inputs: rotated queries [B,H,T,D], rotated keys and values [B,KV,T,D]. */
typedef struct {
    const double *q, *k, *v;
} pd_attn_in;
/* Their adjoints, shaped alike. */
typedef struct {
    double *q, *k, *v;
} pd_attn_grads;

/* Scores, segment-causal softmax (weights pm [B,H,T,T]) and mixing (ho [B,H,T,D]). */
pd_status pd_attention_forward(const pd_attn_geom *a, const pd_attn_in *in, double *pm, double *ho,
                               int block, pd_error *e);
/* dO [B,H,T,D] -> the adjoints of the inputs (query heads of a group summed in query-head
 * order). Fails only when scratch cannot be allocated. */
pd_status pd_attention_backward(const pd_attn_geom *a, const pd_attn_in *in, const double *pm,
                                const double *dO, const pd_attn_grads *d, pd_error *e);

#endif
