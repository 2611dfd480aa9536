/* SPDX-License-Identifier: MIT */
/* SplitMix64 (docs/numerics.md §2.1). */
#include "pd_rng.h"

uint64_t pd_rng_next_u64(pd_rng *rng) {
    rng->state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = rng->state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double pd_rng_next_unit_f64(pd_rng *rng) {
    /* Top 53 bits scaled by 2^-53: both steps exact. */
    return (double)(pd_rng_next_u64(rng) >> 11) * 0x1.0p-53;
}
