/* pd_exp_array: the widest loop this CPU runs, chosen once (PYDEPTH_EXP_PATH=scalar forces the
 * scalar loop for benchmarks and tests). Every path gives the bits of pd_exp. */
#include <stdlib.h>
#include <string.h>
#include "exp_array.h"
#include "exp_avx2.h"
#include "exp.h"
#include "../platform/pd_atomic.h"
#include "../platform/pd_cpu.h"

static void exp_array_scalar(size_t n, const double *in, double *out) {
    for (size_t i = 0; i < n; i++) out[i] = pd_exp(in[i]);
}

typedef struct {
    const char *name;
    pd_exp_array_fn fn;
} exp_path;

#define N_PATHS 2

static exp_path path_at(int i) {
    const exp_path p[N_PATHS] = {{"avx2-fma", pd_exp_array_avx2_fma}, {"scalar", exp_array_scalar}};
    return p[i];
}

static int supported(int i) {
    return i != 0 || (pd_exp_array_avx2_fma && pd_cpu_has_avx2() && pd_cpu_has_fma());
}

static pd_atomic_int g_choice = -1; /* index of the chosen path, -1 before the first call */

static int choose(void) {
    int c = pd_atomic_int_load(&g_choice);
    if (c >= 0) return c;
    const char *want = getenv("PYDEPTH_EXP_PATH");
    c = (supported(0) && !(want && strcmp(want, "scalar") == 0)) ? 0 : 1;
    pd_atomic_int_store(&g_choice, c);
    return c;
}

void pd_exp_array(size_t n, const double *in, double *out) { path_at(choose()).fn(n, in, out); }

const char *pd_exp_array_path(void) { return path_at(choose()).name; }

int pd_force_exp_array_path(const char *name) {
    for (int i = 0; i < N_PATHS; i++) {
        if (name && strcmp(name, path_at(i).name) == 0) {
            if (!supported(i)) return 0;
            pd_atomic_int_store(&g_choice, i);
            return 1;
        }
    }
    return 0;
}
