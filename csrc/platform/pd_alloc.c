/* SPDX-License-Identifier: MIT */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200112L /* posix_memalign under strict -std=c11 */
#endif
#include <stdlib.h>
#include "pd_alloc.h"
#if defined(_WIN32)
#include <malloc.h>
#endif

void *pd_aligned_alloc(size_t align, size_t bytes) {
    if (bytes == 0) bytes = 1; /* a unique pointer, as malloc(0) may not give one */
#if defined(_WIN32)
    return _aligned_malloc(bytes, align);
#else
    void *p = NULL;
    return posix_memalign(&p, align, bytes) == 0 ? p : NULL;
#endif
}

void pd_aligned_free(void *p) {
#if defined(_WIN32)
    _aligned_free(p);
#else
    free(p);
#endif
}
