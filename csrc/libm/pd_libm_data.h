/* Tables of pydepth's elementary functions (reference data; provenance in
 * docs/numerics-elementary.md). */
#ifndef PD_LIBM_DATA_H
#define PD_LIBM_DATA_H
#include <stdint.h>

#define PD_EXP_N 128     /* exp: 2^(k/N) subintervals */
#define PD_LOG_N 128     /* log: subintervals of [0x1.6p-1, 0x1.6p0) */
#define PD_POW_LOG_N 128 /* pow's log: subintervals of [0x1.69555p-1, 0x1.69555p0) */
#define PD_SINCOS_N 110  /* sin/cos at k/128, k = 0..109 */

typedef struct { double invc, logc; } pd_log_entry;
typedef struct { double invc, logc, logctail; } pd_pow_log_entry;

extern const uint64_t pd_exp_table[2 * PD_EXP_N];
extern const pd_log_entry pd_log_table[PD_LOG_N];
extern const pd_pow_log_entry pd_pow_log_table[PD_POW_LOG_N];
extern const double pd_sincos_table[4 * PD_SINCOS_N];

#endif
