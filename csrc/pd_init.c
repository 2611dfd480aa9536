/* SPDX-License-Identifier: MIT */
/* Xavier-uniform scale and fill, parameter-name validation (docs/numerics.md §2.2, §7). */
#include <math.h>
#include "pd_init.h"
#include "pd_tensor.h"

pd_status pd_xavier_scale_of(size_t fan_in, size_t fan_out, pd_xavier_scale *out, pd_error *e) {
    size_t sum;
    if (fan_in == 0) return pd_fail(e, PD_ERR_ZERO_FAN_IN, 0, 0.0, -1, -1);
    if (fan_out == 0) return pd_fail(e, PD_ERR_ZERO_FAN_OUT, 0, 0.0, -1, -1);
    if (!pd_add_ok(fan_in, fan_out, &sum)) return pd_fail(e, PD_ERR_FAN_SUM_OVERFLOW, 0, 0.0, -1, -1);
    out->fan_in = fan_in;
    out->fan_out = fan_out;
    out->target_variance = 2.0 / (double)sum;
    out->standard_deviation = sqrt(out->target_variance);
    out->uniform_limit = sqrt(6.0 / (double)sum); /* integer sum first, then convert */
    return PD_OK;
}

pd_status pd_xavier_fill(const pd_xavier_scale *s, pd_rng *rng, double *out, pd_error *e) {
    size_t n;
    if (!pd_mul_ok(s->fan_in, s->fan_out, &n)) return pd_fail(e, PD_ERR_SHAPE_OVERFLOW, 0, 0.0, -1, -1);
    const double limit = s->uniform_limit;
    for (size_t i = 0; i < n; i++) {
        double centered = 2.0 * pd_rng_next_unit_f64(rng) - 1.0; /* exact */
        out[i] = limit * centered;                                 /* the only rounding */
    }
    return PD_OK;
}

pd_status pd_validate_name(const char *name, size_t len, pd_error *e) {
    if (len == 0) return pd_fail(e, PD_ERR_NAME, 0, 0.0, -1, -1);
    int previous_was_dot = 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '.') {
            if (previous_was_dot) return pd_fail(e, PD_ERR_NAME, i, 0.0, -1, -1);
            previous_was_dot = 1;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return pd_fail(e, PD_ERR_NAME, i, (double)c, -1, -1);
        previous_was_dot = 0;
    }
    if (previous_was_dot) return pd_fail(e, PD_ERR_NAME, len, 0.0, -1, -1);
    return PD_OK;
}
