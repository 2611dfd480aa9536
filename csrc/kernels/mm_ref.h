/* SPDX-License-Identifier: MIT */
/* Reference-order product loops (kernels/mm_ref.c): the ground truth every fast path must
 * match bit for bit, and the path for problems too small to be worth packing. */
#ifndef PD_MM_REF_H
#define PD_MM_REF_H
#include "product.h"

void pd_mm_ref(const pd_product *p);

#endif
