/* Whether this CPU executes FMA instructions: picks each elementary function's build (the bits are
 * the same either way; see pd_libm_bits.h). PYDEPTH_LIBM_FMA=0 forces the build without them. */
#include <stdlib.h>
#include <string.h>
#include "fma_dispatch.h"
#include "../platform/pd_platform.h"
#include "../platform/pd_cpu.h"

#if PD_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
pd_atomic_int pd_libm_fma_state = -1;

int pd_libm_detect_fma(void) {
    const char *want = getenv("PYDEPTH_LIBM_FMA");
    const int s = (pd_cpu_has_fma() && !(want && strcmp(want, "0") == 0)) ? 1 : 0;
    pd_atomic_int_store(&pd_libm_fma_state, s);
    return s;
}
#endif
