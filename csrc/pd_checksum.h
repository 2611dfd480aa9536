/* Position-dependent checksum of a float64 buffer's bit patterns (pd_checksum.c). */
#ifndef PD_CHECKSUM_H
#define PD_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>

size_t pd_values_checksum(const double *x, size_t n);

#endif
