/* SPDX-License-Identifier: MIT */
/* What every optimizer shares: a tensor's operands, the all-or-nothing driver that runs an
 * optimizer's element loop over them, and integer powers. The per-element operation order of
 * each optimizer is the contract in docs/numerics-optimizers.md. */
#ifndef PD_OPTIM_H
#define PD_OPTIM_H
#include <stddef.h>
#include <stdint.h>
#include "../pd_decoder.h"
#include "../pd_error.h"

/* One tensor's operands: the parameter (value, grad, revision) and its slots of param->size
 * doubles (SGD: slot[0] = momentum buffer, used only when momentum != 0; AdamW: slot[0] = exp_avg,
 * slot[1] = exp_avg_sq). */
typedef struct {
    pd_param *param;
    double *slot[2];
} pd_optim_tensor;

/* Runs one tensor's elements [begin, end). commit == 0: writes nothing and returns the first
 * element whose result is non-finite (end when none), with *slot and *value describing it;
 * commit != 0: stores every result and returns end. */
typedef size_t (*pd_optim_chunk_fn)(const void *scalars, const pd_optim_tensor *t, size_t begin,
                                    size_t end, int commit, int *slot, double *value);

/* Checks every element of every tensor, then commits them all and advances every revision. Tensor i
 * runs with the scalars at (const char *)scalars + i * stride: stride 0 shares one set, a stride of
 * their size gives each tensor its own (per-parameter factors, docs/numerics-optimizers.md). Either
 * everything is updated or nothing changes: PD_ERR_NONFINITE with e->block = tensor, e->index =
 * flat element, e->node = 0 (value) / 1 (slot[0]) / 2 (slot[1]), e->value = the refused result;
 * PD_ERR_LAYOUT for a missing buffer. Results are bit-identical for every thread count. */
pd_status pd_optim_apply(const pd_optim_tensor *t, size_t n, const void *scalars, size_t stride,
                         pd_optim_chunk_fn chunk, pd_error *e);

/* 1 when x is neither NaN nor infinite; branch-free so that scans over it vectorize. */
static inline int pd_finite(double x) {
    return (x - x) == 0.0;
}

/* x**k by binary exponentiation from the low bit: r = 1; while k: if k odd r = r*x; x = x*x. */
double pd_powi(double x, uint64_t k);

#endif
