/* SPDX-License-Identifier: MIT */
/* Gradient writers outside the reverse pass: they own the known-zero flag of pd_grad.h. */
#include <stdint.h>
#include <string.h>
#include "pd_grad.h"

void pd_grad_zero(pd_param *p) {
    if (p->size) memset(p->grad, 0, p->size * sizeof(double));
    p->grad_zero = 1;
}

void pd_grad_set(pd_param *p, const double *src) {
    uint64_t any = 0; /* -0.0 is not +0.0: a direct write could not reproduce (-0.0) + c */
    for (size_t i = 0; i < p->size; i++) {
        uint64_t bits;
        memcpy(&bits, &src[i], sizeof bits);
        any |= bits;
    }
    if (p->size) memcpy(p->grad, src, p->size * sizeof(double));
    p->grad_zero = any == 0;
}
