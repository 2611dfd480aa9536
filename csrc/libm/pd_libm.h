/* pydepth's elementary functions: the same bits as glibc (2.28+) on x86-64 with FMA, on every
 * platform (docs/numerics-elementary.md). Plain functions of doubles; they never fail. */
#ifndef PD_LIBM_H
#define PD_LIBM_H
#include "exp.h"
#include "exp_array.h"
#include "log.h"
#include "log1p.h"
#include "pow.h"
#include "sincos.h"
#endif
