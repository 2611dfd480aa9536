/* Which build of the elementary functions runs: with or without FMA instructions (x86-64) */
#ifndef PD_LIBM_FMA_DISPATCH_H
#define PD_LIBM_FMA_DISPATCH_H
#include "../platform/pd_atomic.h"

/* -1 until detected, then 1 if the functions' FMA builds run, else 0. */
extern pd_atomic_int pd_libm_fma_state;
/* Detects (CPU, PYDEPTH_LIBM_FMA) and records the choice; returns it. */
int pd_libm_detect_fma(void);

#endif
