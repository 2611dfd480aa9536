/* SPDX-License-Identifier: MIT */
/* exp over arrays (docs/numerics-elementary.md §7.3): the path chosen once per process. */
#include <stdlib.h>
#include <string.h>
#include "../platform/pd_atomic.h"
#include "../platform/pd_cpu.h"
#include "../platform/pd_platform.h"
#include "exp_array.h"
#include "pd_libm.h"

#define PD_EXP_PATH_AVX2 1
#define PD_EXP_PATH_SCALAR 2
static pd_atomic_int pd_exp_path; /* 0 until chosen */

static int pd_exp_avx2_supported(void) {
#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
    return pd_cpu_has_avx2() && pd_cpu_has_fma();
#else
    return 0;
#endif
}

static int pd_exp_path_now(void) {
    int p = pd_atomic_int_load(&pd_exp_path);
    if (p != 0) return p;
    const char *env = getenv("PYDEPTH_EXP_PATH");
    const int scalar = env != NULL && strcmp(env, "scalar") == 0;
    p = (!scalar && pd_exp_avx2_supported()) ? PD_EXP_PATH_AVX2 : PD_EXP_PATH_SCALAR;
    pd_atomic_int_store(&pd_exp_path, p);
    return p;
}

static void pd_exp_scalar_loop(size_t n, const double *in, double *out) {
    for (size_t i = 0; i < n; i++) out[i] = pd_exp(in[i]);
}

#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
/* The whole groups of four, then the last n mod 4 padded with -1.0 (an in-range value). */
static void pd_exp_avx2_all(size_t n, const double *in, double *out) {
    const size_t whole = n & ~(size_t)3, rest = n - whole;
    if (whole) pd_libm_fma_exp_avx2(whole, in, out);
    if (rest) {
        double buf[4] = {-1.0, -1.0, -1.0, -1.0};
        memcpy(buf, in + whole, rest * sizeof(double));
        pd_libm_fma_exp_avx2(4, buf, buf);
        memcpy(out + whole, buf, rest * sizeof(double));
    }
}
#endif

void pd_exp_array(size_t n, const double *in, double *out) {
#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
    if (pd_exp_path_now() == PD_EXP_PATH_AVX2) {
        pd_exp_avx2_all(n, in, out);
        return;
    }
#endif
    pd_exp_scalar_loop(n, in, out);
}

const char *pd_exp_array_path(void) {
    return pd_exp_path_now() == PD_EXP_PATH_AVX2 ? "avx2-fma" : "scalar";
}

int pd_force_exp_array_path(const char *name) {
    if (name == NULL) return 0;
    if (strcmp(name, "scalar") == 0) {
        pd_atomic_int_store(&pd_exp_path, PD_EXP_PATH_SCALAR);
        return 1;
    }
    if (strcmp(name, "avx2-fma") == 0 && pd_exp_avx2_supported()) {
        pd_atomic_int_store(&pd_exp_path, PD_EXP_PATH_AVX2);
        return 1;
    }
    return 0;
}
