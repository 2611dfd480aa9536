/* SPDX-License-Identifier: MIT */
/* The functions of pd_libm.h, pd_exp ... pd_pow: each calls the build chosen once per process
 * (docs/numerics-elementary.md §7.1). */
#include <stdlib.h>
#include <string.h>
#include "../platform/pd_atomic.h"
#include "../platform/pd_cpu.h"
#include "pd_libm.h"
#include "libm_internal.h"
#include "variant.h"

#if PD_LIBM_TWO_BUILDS
#define PD_LIBM_BUILD_FMA 1
#define PD_LIBM_BUILD_EMU 2
static pd_atomic_int pd_libm_build; /* 0 until chosen */

/* The FMA build where the CPU has FMA and PYDEPTH_LIBM_FMA is not "0". */
static int pd_libm_choose(void) {
    int b = pd_atomic_int_load(&pd_libm_build);
    if (b != 0) return b;
    const char *env = getenv("PYDEPTH_LIBM_FMA");
    const int off = env != NULL && strcmp(env, "0") == 0;
    b = (pd_cpu_has_fma() && !off) ? PD_LIBM_BUILD_FMA : PD_LIBM_BUILD_EMU;
    pd_atomic_int_store(&pd_libm_build, b);
    return b;
}

#define PD_CALL(f, ...)                                                                      \
    (pd_libm_choose() == PD_LIBM_BUILD_FMA ? pd_libm_fma_##f(__VA_ARGS__) : pd_libm_emu_##f(__VA_ARGS__))
#else
#define PD_CALL(f, ...) pd_libm_c99_##f(__VA_ARGS__)
#endif

double pd_exp(double x) { return PD_CALL(exp, x); }
double pd_log(double x) { return PD_CALL(log, x); }
double pd_log1p(double x) { return PD_CALL(log1p, x); }
double pd_sin(double x) { return PD_CALL(sin, x); }
double pd_cos(double x) { return PD_CALL(cos, x); }
double pd_pow(double x, double y) { return PD_CALL(pow, x, y); }
