/* SPDX-License-Identifier: MIT */
/* pydepth's elementary functions: the interface the rest of the core and the Cython skin use
 * (docs/numerics-elementary.md §11). The same bits as glibc (2.28+) on x86-64 with FMA, on
 * every platform and build; plain functions of doubles that never fail. */
#ifndef PD_LIBM_H
#define PD_LIBM_H
#include <stddef.h>

double pd_exp(double x);           /* §2 */
double pd_log(double x);           /* §3 */
double pd_pow(double x, double y); /* §4 */
double pd_log1p(double x);         /* §5 */
double pd_sin(double x);           /* §6 */
double pd_cos(double x);           /* §6 */

/* out[i] = pd_exp(in[i]) for i < n, in == out allowed (§7.3). */
void pd_exp_array(size_t n, const double *in, double *out);
/* out[i] = pd_exp(in[i] - mx) for i < n, each difference rounded on its own first, in == out
 * allowed; returns the first i whose difference is zero, n when none (§7.3). */
size_t pd_exp_shifted_array(size_t n, const double *in, double mx, double *out);
/* The path pd_exp_array runs: "avx2-fma" or "scalar" (§7.3). */
const char *pd_exp_array_path(void);
/* Selects a pd_exp_array path by name (tests); 1 if selected, 0 (nothing changed) otherwise. */
int pd_force_exp_array_path(const char *name);

/* a*b + c rounded once without the FMA instruction: the emulation of §7.2 (tests). */
double pd_fma_soft(double a, double b, double c);

#endif
