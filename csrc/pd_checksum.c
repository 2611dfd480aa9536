/* A position-dependent checksum of parameter values: a recorded graph keeps one per parameter
 * so the reverse pass can tell when values changed behind the revision counter (a writable
 * alias such as torch.from_numpy of a read-only view). */
#include <string.h>
#include "pd_checksum.h"
#include "pd_decoder.h"
#include "kernels/pool.h"
#include "platform/pd_atomic.h"

#define PD_CHECKSUM_GRAIN 65536 /* elements per chunk */

typedef struct {
    const double *x;
    pd_atomic_size sum;
} sum_ctx;

/* mix(bits, i): a multiply after an index-dependent xor, so moved values change the sum too */
static void sum_task(void *vctx, size_t begin, size_t end) {
    sum_ctx *c = vctx;
    const size_t step = (size_t)0x9E3779B97F4A7C15u;
    size_t s = 0, key = begin * step; /* key = i * step, kept by addition */
    for (size_t i = begin; i < end; i++, key += step) {
        uint64_t bits;
        memcpy(&bits, &c->x[i], sizeof bits);
        s += (size_t)((bits ^ key) * 0xBF58476D1CE4E5B9u);
    }
    pd_atomic_size_fetch_add(&c->sum, s); /* addition commutes: any chunking gives one sum */
}

size_t pd_values_checksum(const double *x, size_t n) {
    sum_ctx c;
    c.x = x;
    pd_atomic_size_store(&c.sum, 0);
    pd_parallel_for(n, PD_CHECKSUM_GRAIN, sum_task, &c);
    return pd_atomic_size_fetch_add(&c.sum, 0);
}

typedef struct {
    pd_param *const *params;
    size_t *out;
} params_ctx;

static void params_task(void *vctx, size_t begin, size_t end) {
    params_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) c->out[i] = pd_values_checksum(c->params[i]->value, c->params[i]->size);
}

void pd_params_checksums(pd_param *const *params, size_t n, size_t *out) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += params[i]->size;
    params_ctx c = {params, out};
    /* one parameter per chunk above two chunks' worth of elements, else one inline pass */
    pd_parallel_for(n, total >= 2 * PD_CHECKSUM_GRAIN ? 1 : n, params_task, &c);
}
