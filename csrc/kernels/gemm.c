/* Blocked, packed, multi-threaded products. Each thread owns a disjoint block of C; inside
 * it, every output's sum runs k = 0..K-1 in order: k-blocks hand the partial sum on through
 * C itself (stored and reloaded exactly), and acc mode adds the original C once at the end,
 * so the result is bit-identical to pd_mm_ref for any block size, path or thread count. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "gemm.h"
#include "gemm_small.h"
#include "mm_ref.h"
#include "pool.h"
#include "transpose.h"
#include "ukernel.h"
#include "../platform/pd_alloc.h"
#include "../platform/pd_atomic.h"
#include "../platform/pd_cpu.h"
#include "../platform/pd_platform.h"
#include "../platform/pd_thread.h"

/* Below this many multiply-adds (64x64x64) packing costs more than it saves, so the unpacked
 * kernels of gemm_small.c run instead (benchmarks/KERNELS.md has the measurement). */
#ifndef PD_SMALL_MACS
#define PD_SMALL_MACS (1u << 18)
#endif
#define PD_TILE_MAX (8 * 16)
/* A transposed A's stored rows lie a power of two apart in the vocabulary products, too many
 * short streams for the hardware prefetcher: its packing asks for the row this many k ahead
 * (benchmarks/KERNELS.md has the measurement). */
#define PD_PACK_A_PREFETCH 8

/* ---- per-thread scratch, reused across calls ---------------------------------------- */

typedef struct {
    double *buf;
    size_t cap; /* doubles */
} scratch;

static pd_tls_key g_scratch_key;
static int g_scratch_ok; /* the key exists */
static pd_once g_scratch_once = PD_ONCE_INIT;

static void scratch_free(void *p) {
    scratch *s = p;
    if (!s) return;
    pd_aligned_free(s->buf);
    free(s);
}
static void scratch_init(void) { g_scratch_ok = pd_tls_create(&g_scratch_key, scratch_free) == 0; }

/* NULL when memory (or a thread-local slot) is short: callers fall back to pd_mm_ref. */
static double *scratch_get(size_t n) {
    pd_once_run(&g_scratch_once, scratch_init);
    if (!g_scratch_ok || n > SIZE_MAX / sizeof(double)) return NULL;
    scratch *s = pd_tls_get(g_scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) return NULL;
        if (pd_tls_set(g_scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->cap < n) {
        void *p = pd_aligned_alloc(64, n * sizeof(double));
        if (!p) return NULL;
        pd_aligned_free(s->buf);
        s->buf = p;
        s->cap = n;
    }
    return s->buf;
}

/* ---- path selection --------------------------------------------------------------- */

/* Widest first; the x86 kernels exist only in x86-64 builds. */
static const pd_gemm_path *const g_paths[] = {
#if PD_ARCH_X86_64
    &pd_path_avx512, &pd_path_avx2,
#endif
    &pd_path_baseline};
static pd_atomic_ptr g_path;

static int path_supported(const pd_gemm_path *p) {
#if PD_ARCH_X86_64
    if (p == &pd_path_avx512) return pd_cpu_has_avx512f();
    if (p == &pd_path_avx2) return pd_cpu_has_avx2();
#endif
    return p == &pd_path_baseline;
}

static const pd_gemm_path *path_by_name(const char *name) {
    for (size_t i = 0; i < sizeof g_paths / sizeof g_paths[0]; i++)
        if (name && strcmp(name, g_paths[i]->name) == 0) return g_paths[i];
    return NULL;
}

static const pd_gemm_path *current_path(void) {
    const pd_gemm_path *p = pd_atomic_ptr_load(&g_path);
    if (p) return p;
    /* PYDEPTH_KERNEL_PATH picks a path for benchmarking; otherwise the widest supported */
    p = path_by_name(getenv("PYDEPTH_KERNEL_PATH"));
    if (!p || !path_supported(p)) {
        p = &pd_path_baseline;
        for (size_t i = 0; i < sizeof g_paths / sizeof g_paths[0]; i++)
            if (path_supported(g_paths[i])) { p = g_paths[i]; break; }
    }
    pd_atomic_ptr_store(&g_path, p);
    return p;
}

const char *pd_kernel_path(void) { return current_path()->name; }

int pd_force_kernel_path(const char *name) {
    const pd_gemm_path *p = path_by_name(name);
    if (!p || !path_supported(p)) return 0;
    pd_atomic_ptr_store(&g_path, p);
    return 1;
}

/* ---- packing: zero-padded tiles, so edge slivers only produce discarded outputs ------ */

/* dst[s*kb*mr + k*mr + i] = A(i0+i, k) for sliver s starting at row i0 = s*mr */
static void pack_a(size_t mb, size_t kb, const double *A, size_t rsa, size_t csa, double *dst, int mr,
                   pd_gather_fn gather) {
    size_t i0 = 0;
    if (rsa == 1) { /* transposed A: one stored row per k feeds every full sliver, read once in order */
        i0 = mb / (size_t)mr * (size_t)mr;
        for (size_t k = 0; k < kb; k++) {
            const double *ak = A + k * csa;
            if (k + PD_PACK_A_PREFETCH < kb)
                for (size_t s = 0; s < mb; s += 8) PD_PREFETCH_R(ak + PD_PACK_A_PREFETCH * csa + s);
            double *d = dst + k * (size_t)mr;
            for (size_t s = 0; s < i0; s += (size_t)mr, d += kb * (size_t)mr)
                for (size_t i = 0; i < (size_t)mr; i++) d[i] = ak[s + i];
        }
        dst += i0 * kb;
    }
    for (; i0 < mb; i0 += (size_t)mr) {
        const size_t rows = mb - i0 < (size_t)mr ? mb - i0 : (size_t)mr;
        const double *a = A + i0 * rsa;
        if (rsa == 1) { /* the last, partial sliver */
            for (size_t k = 0; k < kb; k++, dst += mr) {
                size_t i = 0;
                for (; i < rows; i++) dst[i] = a[k * csa + i];
                for (; i < (size_t)mr; i++) dst[i] = 0.0;
            }
        } else if (csa == 1) {
            gather(kb, a, rsa, rows, dst, mr);
            dst += kb * (size_t)mr;
        } else {
            for (size_t k = 0; k < kb; k++, dst += mr) {
                size_t i = 0;
                for (; i < rows; i++) dst[i] = a[i * rsa + k * csa];
                for (; i < (size_t)mr; i++) dst[i] = 0.0;
            }
        }
    }
}

/* dst[s*kb*nr + k*nr + j] = B(k, j0+j) for panel s starting at column j0 = s*nr */
static void pack_b(size_t kb, size_t nb, const double *B, size_t rsb, size_t csb, double *dst, int nr,
                   pd_gather_fn gather) {
    for (size_t j0 = 0; j0 < nb; j0 += (size_t)nr) {
        const size_t cols = nb - j0 < (size_t)nr ? nb - j0 : (size_t)nr;
        const double *b = B + j0 * csb;
        if (csb == 1) {
            for (size_t k = 0; k < kb; k++, dst += nr) {
                size_t j = 0;
                for (; j < cols; j++) dst[j] = b[k * rsb + j];
                for (; j < (size_t)nr; j++) dst[j] = 0.0;
            }
        } else if (rsb == 1) { /* transposed B: nr stored rows, each contiguous in k */
            gather(kb, b, csb, cols, dst, nr);
            dst += kb * (size_t)nr;
        } else {
            for (size_t k = 0; k < kb; k++, dst += nr) {
                size_t j = 0;
                for (; j < cols; j++) dst[j] = b[j * csb + k * rsb];
                for (; j < (size_t)nr; j++) dst[j] = 0.0;
            }
        }
    }
}

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* ---- one thread's block of C ------------------------------------------------------ */

typedef struct {
    const pd_gemm_path *p;
    size_t M, K, N;
    const double *A, *B;
    size_t rsa, csa, rsb, csb;
    double *C;
    size_t ldc;
    int acc;
    int split_rows;  /* tasks split M (else N) */
    size_t step;     /* rows or columns per task */
} gemm_job;

/* Edge tile: run the kernel on a padded copy, then write back only the valid part. A is
 * packed (lda == 0) or read in place from stored rows lda apart. */
static void edge_tile(const pd_gemm_path *p, size_t kb, const double *ap, size_t lda, const double *bp,
                      double *c, size_t ldc, size_t mm, size_t nn, int load, const double *add,
                      size_t ldadd) {
    _Alignas(64) double tmp[PD_TILE_MAX];
    const size_t nr = (size_t)p->nr;
    for (size_t i = 0; i < (size_t)p->mr * nr; i++) tmp[i] = 0.0;
    if (load)
        for (size_t i = 0; i < mm; i++)
            for (size_t j = 0; j < nn; j++) tmp[i * nr + j] = c[i * ldc + j];
    if (lda) p->ukernel_rows(kb, ap, lda, bp, tmp, nr, load, NULL, 0);
    else p->ukernel(kb, ap, bp, tmp, nr, load, NULL, 0);
    for (size_t i = 0; i < mm; i++)
        for (size_t j = 0; j < nn; j++)
            c[i * ldc + j] = add ? add[i * ldadd + j] + tmp[i * nr + j] : tmp[i * nr + j];
}

static int gemm_block(const pd_gemm_path *p, size_t M, size_t K, size_t N, const double *A,
                      size_t rsa, size_t csa, const double *B, size_t rsb, size_t csb, double *C,
                      size_t ldc, int acc) {
    const size_t mr = (size_t)p->mr, nr = (size_t)p->nr;
    const size_t kc = p->kc, mc = p->mc, nc = p->nc;
    const pd_gather_fn gather = pd_gather_for(p);
    const int multi = K > kc;
    const size_t nc_eff = N < nc ? N : nc;
    /* a row-major A is read in place by the kernel; only a block's last, partial sliver is packed */
    const int a_rows = csa == 1 && rsa != 1;
    const size_t a_sz = a_rows ? mr * kc : round_up(mc < M ? mc : M, mr) * kc;
    const size_t b_sz = round_up(nc_eff, nr) * kc;
    /* acc with several k-blocks: C holds partial sums, so keep the addend aside */
    const size_t s_sz = acc && multi ? M * nc_eff : 0;
    double *buf = scratch_get(a_sz + b_sz + s_sz);
    if (!buf) return 0;
    double *bpack = buf, *apack = buf + b_sz, *save = apack + a_sz;
    for (size_t jc = 0; jc < N; jc += nc) {
        const size_t nb = N - jc < nc ? N - jc : nc;
        if (s_sz)
            for (size_t i = 0; i < M; i++) memcpy(save + i * nb, C + i * ldc + jc, nb * sizeof(double));
        for (size_t pc = 0; pc < K; pc += kc) {
            const size_t kb = K - pc < kc ? K - pc : kc;
            const int load = pc > 0, last = pc + kb == K;
            pack_b(kb, nb, B + pc * rsb + jc * csb, rsb, csb, bpack, p->nr, gather);
            for (size_t ic = 0; ic < M; ic += mc) {
                const size_t mb = M - ic < mc ? M - ic : mc;
                const size_t full = a_rows ? mb / mr * mr : 0; /* rows read in place */
                if (full < mb)
                    pack_a(mb - full, kb, A + (ic + full) * rsa + pc * csa, rsa, csa, apack, p->mr, gather);
                for (size_t jr = 0; jr < nb; jr += nr) {
                    const size_t nn = nb - jr < nr ? nb - jr : nr;
                    const double *bp = bpack + jr * kb;
                    for (size_t ir = 0; ir < mb; ir += mr) {
                        const size_t mm = mb - ir < mr ? mb - ir : mr;
                        double *c = C + (ic + ir) * ldc + jc + jr;
                        const double *add = NULL;
                        size_t ldadd = ldc;
                        if (last && acc) {
                            add = s_sz ? save + (ic + ir) * nb + jr : c;
                            ldadd = s_sz ? nb : ldc;
                        }
                        /* the next tile's C rows: partial sums there are read at kernel entry */
                        if (ir + mr < mb)
                            for (size_t i = 0; i < mr; i++) {
                                PD_PREFETCH_W(c + (mr + i) * ldc);
                                PD_PREFETCH_W(c + (mr + i) * ldc + nr - 1);
                            }
                        const size_t lda = ir < full ? rsa : 0;
                        const double *ap = lda ? A + (ic + ir) * rsa + pc : apack + (ir - full) * kb;
                        if (mm == mr && nn == nr && lda)
                            p->ukernel_rows(kb, ap, lda, bp, c, ldc, load, add, ldadd);
                        else if (mm == mr && nn == nr)
                            p->ukernel(kb, ap, bp, c, ldc, load, add, ldadd);
                        else
                            edge_tile(p, kb, ap, lda, bp, c, ldc, mm, nn, load, add, ldadd);
                    }
                }
            }
        }
    }
    return 1;
}

static void gemm_task(void *vctx, size_t begin, size_t end) {
    gemm_job *j = vctx;
    for (size_t t = begin; t < end; t++) {
        const size_t lim = j->split_rows ? j->M : j->N;
        const size_t lo = t * j->step, n = lim - lo < j->step ? lim - lo : j->step;
        int ok;
        if (j->split_rows)
            ok = gemm_block(j->p, n, j->K, j->N, j->A + lo * j->rsa, j->rsa, j->csa, j->B, j->rsb,
                            j->csb, j->C + lo * j->ldc, j->ldc, j->acc);
        else
            ok = gemm_block(j->p, j->M, j->K, n, j->A, j->rsa, j->csa, j->B + lo * j->csb, j->rsb,
                            j->csb, j->C + lo, j->ldc, j->acc);
        if (!ok) { /* out of memory for packing: the reference loops need none */
            if (j->split_rows)
                pd_mm_ref(n, j->K, j->N, j->A + lo * j->rsa, j->rsa, j->csa, j->B, j->rsb, j->csb,
                          j->C + lo * j->ldc, j->ldc, j->acc);
            else
                pd_mm_ref(j->M, j->K, n, j->A, j->rsa, j->csa, j->B + lo * j->csb, j->rsb, j->csb,
                          j->C + lo, j->ldc, j->acc);
        }
    }
}

static void gemm(size_t M, size_t K, size_t N, const double *A, size_t rsa, size_t csa,
                 const double *B, size_t rsb, size_t csb, double *C, size_t ldc, int acc) {
    if (M == 0 || N == 0) return;
    const double macs = (double)M * (double)N * (double)K;
    if (K == 0 || macs < PD_SMALL_MACS) { /* unpacked; a transposed B is copied k-major first */
        double *bt = csb == 1 ? NULL : scratch_get(K * N);
        if (csb == 1 || bt) pd_mm_small(current_path(), M, K, N, A, rsa, csa, B, rsb, csb, bt, C, ldc, acc);
        else pd_mm_ref(M, K, N, A, rsa, csa, B, rsb, csb, C, ldc, acc); /* no memory for the copy */
        return;
    }
    gemm_job j = {.p = current_path(), .M = M, .K = K, .N = N, .A = A, .B = B, .rsa = rsa,
                  .csa = csa, .rsb = rsb, .csb = csb, .C = C, .ldc = ldc, .acc = acc};
    size_t nt = (size_t)pd_get_num_threads(); /* below two chunks' work a second thread costs more than it saves */
    if (pd_parallel_active() || macs < 2.0 * PD_PARALLEL_MIN_WORK) nt = 1;
    /* split the longer side: each task packs all of the other operand. A row-major A is read
     * in place, never packed, so there columns are split whenever there are enough of them:
     * each task packs only its own part of B. */
    j.split_rows = M >= N;
    if (csa == 1 && rsa != 1 && N / (size_t)j.p->nr >= nt) j.split_rows = 0;
    const size_t len = j.split_rows ? M : N, unit = (size_t)(j.split_rows ? j.p->mr : j.p->nr);
    if (nt > len / unit) nt = len / unit ? len / unit : 1;
    j.step = round_up((len + nt - 1) / nt, unit);
    const size_t tasks = (len + j.step - 1) / j.step;
    if (tasks <= 1) gemm_task(&j, 0, 1);
    else pd_parallel_for(tasks, 1, gemm_task, &j);
}

void pd_mm_nn(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc) {
    gemm(M, K, N, A, lda, 1, B, ldb, 1, C, ldc, acc);
}

void pd_mm_nt(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc) {
    gemm(M, K, N, A, lda, 1, B, 1, ldb, C, ldc, acc);
}

void pd_mm_tn(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc) {
    gemm(M, K, N, A, 1, lda, B, ldb, 1, C, ldc, acc);
}
