/* SPDX-License-Identifier: MIT */
/* The persistent thread pool behind every parallel loop of the core (kernels/pool.c). */
#ifndef PD_POOL_H
#define PD_POOL_H
#include <stddef.h>

/* Runs fn(ctx, begin, end) over disjoint chunks of [0, n); each index is handled by exactly
 * one call, so work that writes only its own outputs stays deterministic. */
typedef void (*pd_task_fn)(void *ctx, size_t begin, size_t end);
void pd_parallel_for(size_t n, size_t grain, pd_task_fn fn, void *ctx);

/* Least work (multiply-adds, or comparable element operations) one chunk must hold for a
 * second thread to pay for its wake-up and join; benchmarks/README.md ("grain") has the
 * measurement behind it. */
#define PD_PARALLEL_MIN_WORK (1u << 19)

/* Elements per chunk of the memory-bound passes (copies, adds, SiLU, RoPE and head reshapes):
 * small enough that medium's 128x128 activations split over two threads (benchmarks/KERNELS.md). */
#define PD_EW_GRAIN 8192
/* A read-only scan (finiteness) does less per element than a pass that writes: twice the elements. */
#define PD_SCAN_GRAIN 16384

/* Items per chunk when each item costs work_per_item units: at least one. */
static inline size_t pd_grain(double work_per_item) {
    if (!(work_per_item >= 1.0)) return PD_PARALLEL_MIN_WORK;
    const double g = (double)PD_PARALLEL_MIN_WORK / work_per_item;
    return g < 1.0 ? 1 : (size_t)g + 1;
}

/* Worker threads used by the kernels (>= 1); results never depend on it. */
void pd_set_num_threads(int n);
int pd_get_num_threads(void);

/* Nonzero while the calling thread is running a pd_parallel_for task. */
int pd_parallel_active(void);

#endif
