/* SPDX-License-Identifier: MIT */
/* Token lookup and its scatter-add VJP (ops/embedding.c). */
#ifndef PD_OPS_EMBEDDING_H
#define PD_OPS_EMBEDDING_H
#include <stddef.h>
#include <stdint.h>

/* Row gather x[rho,:] = E[ids[rho],:] and its scatter-add VJP (repeated ids pre-summed). */
void pd_embedding_forward(size_t N, size_t W, const double *E, const int64_t *ids,
                          const uint8_t *valid, double *x);
void pd_embedding_backward(size_t N, size_t W, const double *u, const int64_t *ids,
                           const uint8_t *valid, double *dE);

#endif
