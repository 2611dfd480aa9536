/* SPDX-License-Identifier: MIT */
/* Xavier-uniform scale and fill, and parameter-name validation. */
#ifndef PD_INIT_H
#define PD_INIT_H
#include <stddef.h>
#include "pd_error.h"
#include "pd_rng.h"

typedef struct {
    size_t fan_in, fan_out;
    double target_variance, standard_deviation, uniform_limit;
} pd_xavier_scale;

pd_status pd_xavier_scale_of(size_t fan_in, size_t fan_out, pd_xavier_scale *out, pd_error *e);

/* Fills out[fan_in*fan_out] in row-major draw order; one draw per element. */
pd_status pd_xavier_fill(const pd_xavier_scale *s, pd_rng *rng, double *out, pd_error *e);

/* Lowercase ASCII letters, digits, '_'; dot-separated non-empty segments. */
pd_status pd_validate_name(const char *name, size_t len, pd_error *e);

#endif
