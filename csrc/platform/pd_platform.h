/* SPDX-License-Identifier: MIT */
/* Compiler and architecture facts the core needs, decided once here. */
#ifndef PD_PLATFORM_H
#define PD_PLATFORM_H

/* x86-64 kernels (AVX2, AVX-512) exist only where the compiler targets x86-64. */
#if defined(__x86_64__) || defined(_M_X64) || defined(_M_AMD64)
#define PD_ARCH_X86_64 1
#else
#define PD_ARCH_X86_64 0
#endif
/* aarch64 kernels (NEON): Advanced SIMD is part of every aarch64 CPU, so no run-time check. */
#if defined(__aarch64__) || defined(_M_ARM64)
#define PD_ARCH_AARCH64 1
#else
#define PD_ARCH_AARCH64 0
#endif

/* GCC and clang enable an instruction set per function; MSVC needs no flag for intrinsics. */
#if defined(__GNUC__) || defined(__clang__)
#define PD_TARGET(isa) __attribute__((target(isa)))
#define PD_PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#define PD_PREFETCH_R(p) __builtin_prefetch((p), 0, 3)
#define PD_THREAD_LOCAL _Thread_local
#define PD_NOINLINE __attribute__((noinline))
#define PD_ALWAYS_INLINE __attribute__((always_inline)) inline /* a body specialized by its constant arguments */
#define PD_MAYBE_UNUSED __attribute__((unused)) /* a per-path text some builds leave uncalled */
#elif defined(_MSC_VER)
#define PD_TARGET(isa)
#define PD_PREFETCH_W(p) ((void)(p))
#define PD_PREFETCH_R(p) ((void)(p))
#define PD_THREAD_LOCAL __declspec(thread)
#define PD_NOINLINE __declspec(noinline)
#define PD_ALWAYS_INLINE __forceinline
#define PD_MAYBE_UNUSED
#else
#define PD_TARGET(isa)
#define PD_PREFETCH_W(p) ((void)(p))
#define PD_PREFETCH_R(p) ((void)(p))
#define PD_THREAD_LOCAL _Thread_local
#define PD_NOINLINE
#define PD_ALWAYS_INLINE inline
#define PD_MAYBE_UNUSED
#endif

#endif
