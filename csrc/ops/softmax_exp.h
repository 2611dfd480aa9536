/* The exponentials of one softmax row (ops/softmax_exp.c). */
#ifndef PD_OPS_SOFTMAX_EXP_H
#define PD_OPS_SOFTMAX_EXP_H
#include <stddef.h>

/* p[j] = exp(p[j]) for j < n, the bits of pd_exp, where p holds shifts x - max and p[zero]
 * is the first maximum's zero shift (zero >= n: none). The `room` entries past n are scratch
 * the caller overwrites afterwards. */
void pd_softmax_exp(double *p, size_t n, size_t zero, size_t room);

#endif
