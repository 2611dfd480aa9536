/* SPDX-License-Identifier: MIT */
/* The few atomic operations the core uses: C11 <stdatomic.h> where the compiler has it,
 * Interlocked intrinsics under MSVC (whose C11 atomics are still experimental). */
#ifndef PD_ATOMIC_H
#define PD_ATOMIC_H
#include <stddef.h>

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
typedef volatile long pd_atomic_int;
typedef volatile __int64 pd_atomic_size; /* Windows AMD64 only: size_t is 64 bits */
typedef void *volatile pd_atomic_ptr;

static inline int pd_atomic_int_load(pd_atomic_int *a) { return (int)_InterlockedOr(a, 0); }
static inline void pd_atomic_int_store(pd_atomic_int *a, int v) { _InterlockedExchange(a, v); }
static inline void pd_atomic_size_store(pd_atomic_size *a, size_t v) {
    _InterlockedExchange64(a, (__int64)v);
}
static inline size_t pd_atomic_size_fetch_add(pd_atomic_size *a, size_t v) {
    return (size_t)_InterlockedExchangeAdd64(a, (__int64)v);
}
static inline const void *pd_atomic_ptr_load(pd_atomic_ptr *a) {
    return _InterlockedCompareExchangePointer((void *volatile *)a, NULL, NULL);
}
static inline void pd_atomic_ptr_store(pd_atomic_ptr *a, const void *v) {
    _InterlockedExchangePointer((void *volatile *)a, (void *)v);
}
#else
#include <stdatomic.h>
typedef atomic_int pd_atomic_int;
typedef atomic_size_t pd_atomic_size;
typedef _Atomic(const void *) pd_atomic_ptr;

static inline int pd_atomic_int_load(pd_atomic_int *a) { return atomic_load(a); }
static inline void pd_atomic_int_store(pd_atomic_int *a, int v) { atomic_store(a, v); }
static inline void pd_atomic_size_store(pd_atomic_size *a, size_t v) {
    atomic_store_explicit(a, v, memory_order_relaxed);
}
static inline size_t pd_atomic_size_fetch_add(pd_atomic_size *a, size_t v) {
    return atomic_fetch_add_explicit(a, v, memory_order_relaxed);
}
static inline const void *pd_atomic_ptr_load(pd_atomic_ptr *a) {
    return atomic_load_explicit(a, memory_order_acquire);
}
static inline void pd_atomic_ptr_store(pd_atomic_ptr *a, const void *v) {
    atomic_store_explicit(a, v, memory_order_release);
}
#endif

#endif
