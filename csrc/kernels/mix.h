/* SPDX-License-Identifier: MIT */
/* The alias guard's checksum terms over ranges and packed runs (mix.c); pd_checksum.c owns the
 * checksum built from them. */
#ifndef PD_MIX_H
#define PD_MIX_H
#include <stddef.h>
#include <stdint.h>

/* sum over i in [begin, end) of (bits(x[i]) ^ i*STEP) * MUL, mod 2^64 */
uint64_t pd_mix_range(const double *x, size_t begin, size_t end);

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
/* pd_csum_add_rows that also copies run r to dst's row r of w doubles (w >= cols, zero past cols):
 * a product's packed panel and its terms from one read of each value. */
void pd_csum_pack_rows(pd_csum *s, const double *p, size_t rows, size_t rs, size_t cols, double *dst, size_t w);
/* Adds a part gathered for the same buffer (by another thread, before a join). */
void pd_csum_merge(pd_csum *s, const pd_csum *part);

#endif
