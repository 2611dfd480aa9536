/* SPDX-License-Identifier: MIT */
/* Position-dependent checksum of a float64 buffer's bit patterns (pd_checksum.c). */
#ifndef PD_CHECKSUM_H
#define PD_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>
#include "kernels/mix.h"

size_t pd_values_checksum(const double *x, size_t n);

/* out[i] = pd_values_checksum of params[i]'s values, the parameters spread over the pool as
 * one job (most are too small to split on their own, and the sums are equal either way). */
struct pd_param_s;
void pd_params_checksums(struct pd_param_s *const *params, size_t n, size_t *out);

/* pd_values_checksum(s->base, n): the gathered sum when exactly n values were added, else a pass. */
size_t pd_csum_result(const pd_csum *s, size_t n);

#endif
