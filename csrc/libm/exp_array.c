/* SPDX-License-Identifier: MIT */
/* exp over arrays (docs/numerics-elementary.md §7.3): the path chosen once per process. */
#include <stdlib.h>
#include <string.h>
#include "../platform/pd_atomic.h"
#include "../platform/pd_cpu.h"
#include "../platform/pd_platform.h"
#include "../ops/softmax_steps.h"
#include "exp_array.h"
#include "pd_libm.h"

#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
#define PD_EXP_VECTOR 1 /* the vector loops exist on x86-64 GCC/clang only */
#else
#define PD_EXP_VECTOR 0
#endif

typedef void (*pd_exp_loop)(size_t n, const double *in, double *out);
typedef size_t (*pd_exp_shifted_loop)(size_t n, const double *in, double mx, double *out);

/* The softmax rows' own shift step (ops/softmax_steps.h): differences and the first zero one. */
static size_t pd_exp_shift(size_t n, const double *in, double mx, double *out) { PD_SHIFT_BODY(in, out, n, mx); }

/* The differences in[i] - mx into out, then the path's exps over them. */
static size_t pd_exp_shift_then(pd_exp_loop run, size_t n, const double *in, double mx, double *out) {
    const size_t first = pd_exp_shift(n, in, mx, out);
    run(n, out, out);
    return first;
}

static void pd_exp_scalar_loop(size_t n, const double *in, double *out) {
    for (size_t i = 0; i < n; i++) out[i] = pd_exp(in[i]);
}

static size_t pd_exp_scalar_shifted(size_t n, const double *in, double mx, double *out) {
    return pd_exp_shift_then(pd_exp_scalar_loop, n, in, mx, out);
}

static int pd_exp_always(void) { return 1; }

#if PD_EXP_VECTOR
/* The whole groups of `lanes`, then the last n mod lanes padded with -1.0 (an in-range value). */
static inline void pd_exp_groups(size_t lanes, pd_exp_loop groups, size_t n, const double *in, double *out) {
    const size_t whole = n - n % lanes, rest = n - whole;
    if (whole) groups(whole, in, out);
    if (rest) {
        double buf[8] = {-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0};
        memcpy(buf, in + whole, rest * sizeof(double));
        groups(lanes, buf, buf);
        memcpy(out + whole, buf, rest * sizeof(double));
    }
}

static void pd_exp_avx2_all(size_t n, const double *in, double *out) {
    pd_exp_groups(4, pd_libm_fma_exp_avx2, n, in, out);
}

static size_t pd_exp_avx2_shifted(size_t n, const double *in, double mx, double *out) {
    return pd_exp_shift_then(pd_exp_avx2_all, n, in, mx, out);
}

static int pd_exp_avx2_supported(void) { return pd_cpu_has_avx2() && pd_cpu_has_fma(); }
static int pd_exp_avx512_supported(void) { return pd_cpu_has_avx512f(); }
#endif

/* The paths, widest first: the first supported row is the default; "scalar" is always last. */
static const struct {
    const char *name;
    int (*supported)(void);
    pd_exp_loop run;
    pd_exp_shifted_loop shifted; /* the shift folded into the exps' sweep, or a pass before it */
} pd_exp_paths[] = {
#if PD_EXP_VECTOR
    {"avx512-fma", pd_exp_avx512_supported, pd_libm_fma_exp_avx512, pd_libm_fma_exp_shifted_avx512},
    {"avx2-fma", pd_exp_avx2_supported, pd_exp_avx2_all, pd_exp_avx2_shifted},
#endif
    {"scalar", pd_exp_always, pd_exp_scalar_loop, pd_exp_scalar_shifted},
};
#define PD_EXP_NPATHS ((int)(sizeof pd_exp_paths / sizeof pd_exp_paths[0]))

static pd_atomic_int pd_exp_path; /* 1 + the row chosen; 0 until chosen */

static int pd_exp_row_named(const char *name) {
    for (int r = 0; name != NULL && r < PD_EXP_NPATHS; r++)
        if (strcmp(name, pd_exp_paths[r].name) == 0) return r;
    return -1;
}

/* PYDEPTH_EXP_PATH names a row: the first supported row from it on (never a wider one);
 * unset or unknown, the widest supported row. */
static int pd_exp_row_now(void) {
    int p = pd_atomic_int_load(&pd_exp_path);
    if (p != 0) return p - 1;
    int r = pd_exp_row_named(getenv("PYDEPTH_EXP_PATH"));
    if (r < 0) r = 0;
    while (!pd_exp_paths[r].supported()) r++;
    pd_atomic_int_store(&pd_exp_path, r + 1);
    return r;
}

void pd_exp_array(size_t n, const double *in, double *out) { pd_exp_paths[pd_exp_row_now()].run(n, in, out); }

size_t pd_exp_shifted_array(size_t n, const double *in, double mx, double *out) {
    return pd_exp_paths[pd_exp_row_now()].shifted(n, in, mx, out);
}

const char *pd_exp_array_path(void) { return pd_exp_paths[pd_exp_row_now()].name; }

int pd_force_exp_array_path(const char *name) {
    const int r = pd_exp_row_named(name);
    if (r < 0 || !pd_exp_paths[r].supported()) return 0;
    pd_atomic_int_store(&pd_exp_path, r + 1);
    return 1;
}
