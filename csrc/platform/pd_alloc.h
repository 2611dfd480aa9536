/* SPDX-License-Identifier: MIT */
/* 64-byte aligned blocks: posix_memalign on POSIX, _aligned_malloc on Windows. Memory from
 * pd_aligned_alloc must go back through pd_aligned_free (Windows cannot free() it). */
#ifndef PD_ALLOC_H
#define PD_ALLOC_H
#include <stddef.h>

/* NULL when bytes cannot be had; align is a power of two and a multiple of sizeof(void *). */
void *pd_aligned_alloc(size_t align, size_t bytes);
void pd_aligned_free(void *p);

#endif
