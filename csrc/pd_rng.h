/* SPDX-License-Identifier: MIT */
/* SplitMix64: the seed is the raw state; the state advances before mixing. */
#ifndef PD_RNG_H
#define PD_RNG_H
#include <stdint.h>

typedef struct { uint64_t state; } pd_rng;

uint64_t pd_rng_next_u64(pd_rng *rng);
double pd_rng_next_unit_f64(pd_rng *rng);

#endif
