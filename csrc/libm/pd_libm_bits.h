/* Bit access and the one fused operation the elementary functions use. Internal to csrc/libm. */
#ifndef PD_LIBM_BITS_H
#define PD_LIBM_BITS_H
#include <math.h>
#include <stdint.h>
#include "../platform/pd_platform.h"
#include "fma_dispatch.h"
#include "fma_soft.h"
#include "pd_float_bits.h"

/* a*b + c rounded once, written out wherever the reference build fuses. hw is a constant of each
 * build: 1 where fma() is an instruction (or the platform's exact fma), 0 in the x86-64 build for
 * CPUs without FMA, which emulates it (fma_soft.c). Exact either way, so the same bits. */
static inline double pd_fma(int hw, double a, double b, double c) {
    return hw ? fma(a, b, c) : pd_fma_soft(a, b, c);
}

/* Each function's body (taking hw first) is built twice on x86-64 with GCC/clang: for CPUs with
 * the FMA instructions (hw = 1: fma() becomes one instruction) and without (hw = 0). The two give
 * the same bits; the choice is made once per process. Elsewhere there is one build with hw = 1
 * (aarch64 compilers emit the fused instruction for fma() directly). */
#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
#define PD_LIBM_INLINE static inline __attribute__((always_inline))
static inline int pd_libm_fma_ok(void) {
    const int s = pd_atomic_int_load(&pd_libm_fma_state);
    return s >= 0 ? s : pd_libm_detect_fma();
}
/* The FMA builds are global and named pd_libm_fma_*: the only functions of the core allowed to
 * hold FMA instructions (tests/test_kernels.py checks the disassembly by that name). */
#define PD_LIBM_DEFINE1(name, body)                                                          \
    PD_TARGET("fma") double pd_libm_fma_##name(double x);                                    \
    PD_TARGET("fma") double pd_libm_fma_##name(double x) { return body(1, x); }              \
    static double name##_without_fma(double x) { return body(0, x); }                       \
    double name(double x) { return pd_libm_fma_ok() ? pd_libm_fma_##name(x) : name##_without_fma(x); }
#define PD_LIBM_DEFINE2(name, body)                                                          \
    PD_TARGET("fma") double pd_libm_fma_##name(double x, double y);                          \
    PD_TARGET("fma") double pd_libm_fma_##name(double x, double y) { return body(1, x, y); } \
    static double name##_without_fma(double x, double y) { return body(0, x, y); }           \
    double name(double x, double y) {                                                        \
        return pd_libm_fma_ok() ? pd_libm_fma_##name(x, y) : name##_without_fma(x, y);       \
    }
#else
#define PD_LIBM_INLINE static inline
#define PD_LIBM_DEFINE1(name, body) \
    double name(double x) { return body(1, x); }
#define PD_LIBM_DEFINE2(name, body) \
    double name(double x, double y) { return body(1, x, y); }
#endif

#endif
