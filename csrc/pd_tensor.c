#include <math.h>
#include <stdlib.h>
#include "pd_tensor.h"

double *pd_zeros(size_t n, pd_error *e) {
    size_t bytes;
    if (!pd_mul_ok(n, sizeof(double), &bytes)) {
        pd_fail(e, PD_ERR_OVERFLOW, n, 0.0, -1, -1);
        return NULL;
    }
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) pd_fail(e, PD_ERR_ALLOC, n, 0.0, -1, -1);
    return p;
}

int pd_all_finite(const double *x, size_t n, size_t *where) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            if (where) *where = i;
            return 0;
        }
    }
    return 1;
}
