/* SPDX-License-Identifier: MIT */
/* Position-dependent checksum of a float64 buffer's bit patterns (pd_checksum.c). */
#ifndef PD_CHECKSUM_H
#define PD_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>

size_t pd_values_checksum(const double *x, size_t n);

/* out[i] = pd_values_checksum of params[i]'s values, the parameters spread over the pool as
 * one job (most are too small to split on their own, and the sums are equal either way). */
struct pd_param_s;
void pd_params_checksums(struct pd_param_s *const *params, size_t n, size_t *out);

/* One parameter's checksum gathered piecewise while products pack it (kernels/gemm.c), each term
 * with its value's index in the buffer at base. One thread adds to a pd_csum at a time: a
 * product split over the pool gives each task its own and merges them after the join. */
typedef struct pd_csum_s {
    const double *base;
    uint64_t sum; /* the terms, mod 2^64 */
    size_t count; /* how many values they cover */
} pd_csum;

void pd_csum_init(pd_csum *s, const double *base);
/* Adds the terms of `rows` runs of `cols` values at p, runs `rs` apart, p inside s->base's buffer. */
void pd_csum_add_rows(pd_csum *s, const double *p, size_t rows, size_t rs, size_t cols);
/* Adds a part gathered for the same buffer (by another thread, before a join). */
void pd_csum_merge(pd_csum *s, const pd_csum *part);
/* pd_values_checksum(s->base, n): the gathered sum when exactly n values were added, else a pass. */
size_t pd_csum_result(const pd_csum *s, size_t n);

#endif
