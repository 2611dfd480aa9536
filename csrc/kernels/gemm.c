/* SPDX-License-Identifier: MIT */
/* Blocked, packed, multi-threaded products. Each thread owns a disjoint block of C; inside
 * it, every output's sum runs k = 0..K-1 in order: k-blocks hand the partial sum on through
 * C itself (stored and reloaded exactly), and acc mode adds the original C once at the end,
 * so the result is bit-identical to pd_mm_ref for any block size, path or thread count. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "gemm.h"
#include "mix.h"
#include "gemm_small.h"
#include "mm_ref.h"
#include "pack.h"
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
/* The k-major copy of a small product's transposed operand up to this many doubles lives on
 * the stack (16 x 20 weights, attention's head slices, X Eᵀ's 16 x 16 rows: 8 KiB). */
#define PD_SMALL_LOCAL 1024
#define PD_TILE_MAX (8 * 16)
/* A read in place has no packed block to keep in L2: up to this many rows form one block, so
 * each packed B panel feeds all their tiles from L1 right after its packing (medium's 128-row
 * products). Taller products, and rows a page or more apart (each row on its own page and in
 * the same few cache sets: the head's dlogits), keep the path's mc (benchmarks/KERNELS.md). */
#ifndef PD_MC_ROWS
#define PD_MC_ROWS 128
#endif
#define PD_PAGE_DOUBLES 512
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

/* Widest first; the x86 kernels exist only in x86-64 builds, the NEON one only in aarch64's. */
static const pd_gemm_path *const g_paths[] = {
#if PD_ARCH_X86_64
    &pd_path_avx512, &pd_path_avx2,
#endif
#if PD_ARCH_AARCH64
    &pd_path_neon,
#endif
    &pd_path_baseline};
static pd_atomic_ptr g_path;

static int path_supported(const pd_gemm_path *p) {
#if PD_ARCH_X86_64
    if (p == &pd_path_avx512) return pd_cpu_has_avx512f();
    if (p == &pd_path_avx2) return pd_cpu_has_avx2();
#endif
#if PD_ARCH_AARCH64
    if (p == &pd_path_neon) return 1;
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

static pd_atomic_int g_fold; /* 0 unknown, 1 separate broadcasts, 2 folded */

int pd_avx512_folds(void) {
    int f = pd_atomic_int_load(&g_fold);
    if (f == 0) pd_atomic_int_store(&g_fold, f = 1 + pd_cpu_avx512_half_width());
    return f == 2;
}

void pd_force_avx512_fold(int mode) { pd_atomic_int_store(&g_fold, mode < 0 ? 0 : 1 + (mode != 0)); }

int pd_force_kernel_path(const char *name) {
    const pd_gemm_path *p = path_by_name(name);
    if (!p || !path_supported(p)) return 0;
    pd_atomic_ptr_store(&g_path, p);
    return 1;
}

/* ---- packing: zero-padded tiles, so edge slivers only produce discarded outputs ------ */

/* dst[s*kb*mr + k*mr + i] = A(i0+i, k) for sliver s starting at row i0 = s*mr */
static void pack_a(size_t mb, size_t kb, const double *A, size_t rsa, size_t csa, double *dst, int mr,
                   const pd_packers *pk, pd_gather_fn gather) {
    size_t i0 = 0;
    if (rsa == 1) { /* transposed A: one stored row per k feeds every full sliver, read once in order */
        i0 = mb / (size_t)mr * (size_t)mr;
        pk->slivers(kb, A, csa, i0 / (size_t)mr, dst, mr);
        dst += i0 * kb;
    }
    for (; i0 < mb; i0 += (size_t)mr) {
        const size_t rows = mb - i0 < (size_t)mr ? mb - i0 : (size_t)mr;
        const double *a = A + i0 * rsa;
        if (rsa == 1) { /* the last, partial sliver */
            pk->rows(kb, a, csa, rows, dst, mr);
            dst += kb * (size_t)mr;
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

/* B's kb x cols block at b into s: along its stored runs, whichever way B is laid out. */
static void bsum_add(struct pd_csum_s *s, const double *b, size_t kb, size_t cols, size_t rsb, size_t csb) {
    if (!s || kb == 0 || cols == 0) return;
    if (csb == 1) pd_csum_add_rows(s, b, kb, rsb, cols);      /* kb runs of cols values */
    else if (rsb == 1) pd_csum_add_rows(s, b, cols, csb, kb); /* cols runs of kb values */
    else
        for (size_t k = 0; k < kb; k++) pd_csum_add_rows(s, b + k * rsb, cols, csb, 1);
}

/* One k-block of B: kb rows by nb columns from src, as pd_product lays them out. */
typedef struct {
    const double *src;
    size_t rsb, csb, kb, nb;
} b_block;

/* Panel jr of the block, dst[k*nr + j] = B(k, jr + j) for j < cols, zero-padded to nr columns;
 * its terms into s when given (the panel's source was just read: no second trip to memory; a
 * row-major B's rows feed the copy and the terms from one read). */
static void pack_b(const pd_gemm_path *p, const b_block *bk, size_t jr, double *dst, struct pd_csum_s *s) {
    const int nr = p->nr;
    const size_t w = (size_t)nr, kb = bk->kb, rsb = bk->rsb, csb = bk->csb;
    const size_t cols = bk->nb - jr < w ? bk->nb - jr : w;
    const double *b = bk->src + jr * csb;
    const pd_packers *pk = pd_packers_for(p);
    const pd_gather_fn gather = pd_gather_for(p);
    if (csb == 1 && s) {
        pd_csum_pack_rows(s, b, kb, rsb, cols, dst, w);
        return;
    }
    if (csb == 1) {
        pk->rows(kb, b, rsb, cols, dst, nr);
    } else if (rsb == 1) { /* transposed B: cols stored rows, each contiguous in k */
        gather(kb, b, csb, cols, dst, nr);
    } else {
        for (size_t k = 0; k < kb; k++, dst += w) {
            size_t j = 0;
            for (; j < cols; j++) dst[j] = b[j * csb + k * rsb];
            for (; j < w; j++) dst[j] = 0.0;
        }
    }
    bsum_add(s, b, kb, cols, rsb, csb);
}

/* Where panel `col` / nr of the k-block starting at term pc lies in B packed whole (npad: N
 * rounded up to whole panels): each k-block's panels in column order, nr columns by kb terms. */
static size_t panel_offset(size_t npad, size_t pc, size_t col, size_t kb) { return pc * npad + col * kb; }

/* The next panel's source lines (panel_lines.h): `cols` columns of kb terms from b. */
static pd_panel_lines next_panel_lines(size_t kb, size_t cols, const double *b, size_t rsb, size_t csb) {
    pd_panel_lines c = {b, 0, 0, 0, 0, 0};
    if (csb == 1) c.stride = rsb, c.rows = kb, c.len = cols; /* kb rows of cols doubles */
    else if (rsb == 1) c.stride = csb, c.rows = cols, c.len = kb; /* cols stored rows of kb doubles */
    return c; /* any other layout: rows == 0, nothing asked for */
}

/* The first row block packs panel jr just before its tiles (its source is then read while
 * the previous panel's tiles ran, not in one burst up front) and aims pf at the next panel;
 * returns how many of its lines each of the block's mb rows' tiles asks for. */
static size_t pack_panel(const pd_gemm_path *p, const b_block *b, size_t jr, size_t mb, double *dst,
                         pd_panel_lines *pf, struct pd_csum_s *s) {
    const size_t nr = (size_t)p->nr, mr = (size_t)p->mr, kb = b->kb, nb = b->nb;
    pack_b(p, b, jr, dst, s);
    if (jr + nr >= nb) return 0;
    *pf = next_panel_lines(kb, nb - jr - nr < nr ? nb - jr - nr : nr, b->src + (jr + nr) * b->csb, b->rsb, b->csb);
    const size_t tiles = (mb + mr - 1) / mr;
    return (pf->rows * ((pf->len + 7) / 8 + 1) + tiles - 1) / tiles;
}

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* ---- one thread's block of C ------------------------------------------------------ */

typedef struct {
    const pd_gemm_path *p;
    pd_product prod;
    int split_rows;  /* tasks split M (else N) */
    size_t step;     /* rows or columns per task */
    struct pd_csum_s *parts; /* [tasks] with several tasks: each one's share of prod.bsum */
} gemm_job;

/* One register tile: kb terms of packed A slivers (lda == 0) or of A's stored rows lda apart,
 * times a packed B panel, into C; io: how it starts and ends, and its share of the next
 * panel's lines. */
typedef struct {
    size_t kb;
    const double *ap;
    size_t lda;
    const double *bp;
    double *c;
    size_t ldc;
    pd_tile_io io;
} tile;

/* The C rows of the tile after the one at row ir of panel jr, in a block's loop order (cb: the
 * block's first output, mb x nb): the panel's next rows, else the next panel's first rows; none
 * after the block's last tile. Its partial sums are read as it starts, and its stores should
 * not wait for their lines. */
static pd_tile_rows next_tile_rows(const pd_gemm_path *p, double *cb, size_t ldc, size_t mb, size_t nb, size_t ir,
                                   size_t jr) {
    const size_t mr = (size_t)p->mr, nr = (size_t)p->nr;
    pd_tile_rows r = {cb, ldc, 0, 0, 0};
    if (ir + mr < mb) {
        r.base = cb + (ir + mr) * ldc + jr;
        r.rows = mb - ir - mr < mr ? mb - ir - mr : mr;
        r.len = nb - jr < nr ? nb - jr : nr;
    } else if (jr + nr < nb) {
        r.base = cb + jr + nr;
        r.rows = mb < mr ? mb : mr;
        r.len = nb - jr - nr < nr ? nb - jr - nr : nr;
    }
    return r;
}

/* Splits a tile's asks: a path whose tiles spread them gets the next tile's C rows and up to the
 * rest of its kb terms of the panel's `share` lines in `io`; whatever does not go in is asked
 * for here, just before the tile. */
static void tile_asks(const pd_gemm_path *p, size_t kb, size_t share, pd_tile_rows *next_c, pd_tile_io *io) {
    const size_t c_lines = pd_tile_rows_lines(next_c);
    const int c_in = p->lines_in_tile && c_lines <= kb;
    const size_t room = p->lines_in_tile ? kb - (c_in ? c_lines : 0) : 0;
    io->lines = share < room ? share : room;
    for (size_t n = io->lines; n < share; n++) pd_panel_line(io->next);
    if (c_in) io->next_c = next_c;
    else
        while (next_c->asked < c_lines) pd_tile_rows_ask(next_c);
}

/* Edge tile: run the kernel on a padded copy, then write back only the valid mm x nn part. */
static void edge_tile(const pd_gemm_path *p, const tile *t, size_t mm, size_t nn) {
    _Alignas(64) double tmp[PD_TILE_MAX];
    const size_t nr = (size_t)p->nr, ldc = t->ldc, ldadd = t->io.ldadd;
    double *c = t->c;
    const double *add = t->io.add;
    const pd_tile_io io = {t->io.load, NULL, 0, t->io.next, t->io.lines, t->io.next_c};
    for (size_t i = 0; i < (size_t)p->mr * nr; i++) tmp[i] = 0.0;
    if (io.load)
        for (size_t i = 0; i < mm; i++)
            for (size_t j = 0; j < nn; j++) tmp[i * nr + j] = c[i * ldc + j];
    if (t->lda) p->ukernel_rows(t->kb, t->ap, t->lda, t->bp, tmp, nr, &io);
    else p->ukernel(t->kb, t->ap, t->bp, tmp, nr, &io);
    for (size_t i = 0; i < mm; i++)
        for (size_t j = 0; j < nn; j++)
            c[i * ldc + j] = add ? add[i * ldadd + j] + tmp[i * nr + j] : tmp[i * nr + j];
}

/* A full tile straight into C, a partial one (mm x nn) through edge_tile. */
static void run_tile(const pd_gemm_path *p, const tile *t, size_t mm, size_t nn) {
    if (mm == (size_t)p->mr && nn == (size_t)p->nr && t->lda)
        p->ukernel_rows(t->kb, t->ap, t->lda, t->bp, t->c, t->ldc, &t->io);
    else if (mm == (size_t)p->mr && nn == (size_t)p->nr)
        p->ukernel(t->kb, t->ap, t->bp, t->c, t->ldc, &t->io);
    else
        edge_tile(p, t, mm, nn);
}

static int gemm_block(const pd_gemm_path *p, const pd_product *q) {
    const size_t M = q->M, K = q->K, N = q->N, rsa = q->rsa, csa = q->csa, rsb = q->rsb, csb = q->csb;
    const size_t ldc = q->ldc;
    const double *A = q->A, *B = q->B;
    double *C = q->C;
    const int acc = q->acc;
    const size_t mr = (size_t)p->mr, nr = (size_t)p->nr;
    const size_t kc = p->kc, nc = p->nc;
    const pd_gather_fn gather = pd_gather_for(p);
    const pd_packers *packers = pd_packers_for(p);
    const int multi = K > kc;
    const size_t nc_eff = N < nc ? N : nc;
    /* a row-major A is read in place by the kernel; only a block's last, partial sliver is packed */
    const int a_rows = csa == 1 && rsa != 1;
    const size_t mc = a_rows && M <= PD_MC_ROWS && rsa < PD_PAGE_DOUBLES ? M : p->mc;
    const size_t a_sz = a_rows ? mr * kc : round_up(mc < M ? mc : M, mr) * kc;
    /* B packed before the call on this path: no panel of it is packed here */
    const pd_b_panels *pre = q->bp && q->bp->panels && q->bp->path == p ? q->bp : NULL;
    const size_t b_sz = pre ? 0 : round_up(nc_eff, nr) * kc;
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
            const b_block bblk = {B + pc * rsb + jc * csb, rsb, csb, kb, nb};
            /* the block's panels: packed before the call, else the first row block's as it goes */
            const double *panels = pre ? pre->panels + panel_offset(pre->npad, pc, q->bp_col + jc, kb) : bpack;
            for (size_t ic = 0; ic < M; ic += mc) {
                const size_t mb = M - ic < mc ? M - ic : mc;
                const size_t full = a_rows ? mb / mr * mr : 0; /* rows read in place */
                if (full < mb)
                    pack_a(mb - full, kb, A + (ic + full) * rsa + pc * csa, rsa, csa, apack, p->mr, packers,
                           gather);
                for (size_t jr = 0; jr < nb; jr += nr) {
                    const size_t nn = nb - jr < nr ? nb - jr : nr;
                    pd_panel_lines pf = {0};
                    const size_t pf_per_tile =
                        ic == 0 && !pre ? pack_panel(p, &bblk, jr, mb, bpack + jr * kb, &pf, q->bsum) : 0;
                    for (size_t ir = 0; ir < mb; ir += mr) {
                        const size_t mm = mb - ir < mr ? mb - ir : mr;
                        tile t = {.kb = kb, .bp = panels + jr * kb, .c = C + (ic + ir) * ldc + jc + jr,
                                  .ldc = ldc, .io = {load, NULL, ldc, &pf, 0, NULL}};
                        pd_tile_rows next_c = next_tile_rows(p, C + ic * ldc + jc, ldc, mb, nb, ir, jr);
                        tile_asks(p, kb, pf_per_tile, &next_c, &t.io);
                        if (last && acc) {
                            t.io.add = s_sz ? save + (ic + ir) * nb + jr : t.c;
                            t.io.ldadd = s_sz ? nb : ldc;
                        }
                        t.lda = ir < full ? rsa : 0;
                        t.ap = t.lda ? A + (ic + ir) * rsa + pc : apack + (ir - full) * kb;
                        run_tile(p, &t, mm, nn);
                    }
                }
            }
        }
    }
    return 1;
}

/* Task t's rows (or columns) of the product. */
static pd_product task_part(const gemm_job *j, size_t t) {
    pd_product part = j->prod;
    const size_t lim = j->split_rows ? part.M : part.N;
    const size_t lo = t * j->step, n = lim - lo < j->step ? lim - lo : j->step;
    if (j->split_rows) {
        part.M = n;
        part.A += lo * part.rsa;
        part.C += lo * part.ldc;
    } else {
        part.N = n;
        part.B += lo * part.csb;
        part.bp_col += lo;
        part.C += lo;
    }
    return part;
}

static void gemm_task(void *vctx, size_t begin, size_t end) {
    const gemm_job *j = vctx;
    for (size_t t = begin; t < end; t++) {
        pd_product part = task_part(j, t);
        /* every row task packs all of B: the first one counts it; several tasks add to own parts */
        if (part.bsum) part.bsum = j->split_rows && t > 0 ? NULL : j->parts ? &j->parts[t] : part.bsum;
        /* out of memory for packing: the reference loops need none */
        if (!gemm_block(j->p, &part)) {
            pd_mm_ref(&part);
            bsum_add(part.bsum, part.B, part.K, part.N, part.rsb, part.csb);
        }
    }
}

/* A transposed B's unpacked product, out of gemm's line: its k-major copy's 8 KiB stack frame
 * and the stack realignment stay off the row-major calls. */
static PD_NOINLINE void gemm_small_t(const pd_product *q) {
    const size_t K = q->K, N = q->N;
    _Alignas(64) double local[PD_SMALL_LOCAL]; /* most transposed Bs: no thread-local lookup */
    double *bt = K * N <= PD_SMALL_LOCAL ? local : scratch_get(K * N);
    if (bt) pd_mm_small(current_path(), q, bt);
    else pd_mm_ref(q); /* no memory for the copy */
}

/* Fewer than PD_SMALL_MACS multiply-adds (or none), in integers, not doubles (a few ns a call):
 * M*N and K each below the limit keep M*N*K below its square, 2^36. */
static int small_product(size_t M, size_t K, size_t N) {
    const size_t lim = PD_SMALL_MACS;
    return K == 0 || (M < lim && N < lim && K < lim && M * N < lim && M * N * K < lim);
}

static void gemm(const pd_product *q) {
    const size_t M = q->M, K = q->K, N = q->N;
    if (M == 0 || N == 0) return;
    if (small_product(M, K, N)) { /* unpacked; a transposed B is copied k-major first */
        if (q->csb == 1) current_path()->small(q); /* B by rows: the path's kernel as given */
        else gemm_small_t(q);
        bsum_add(q->bsum, q->B, K, N, q->rsb, q->csb); /* B is still in cache */
        return;
    }
    const double macs = (double)M * (double)N * (double)K;
    gemm_job j = {.p = current_path(), .prod = *q};
    size_t nt = (size_t)pd_get_num_threads(); /* below two chunks' work a second thread costs more than it saves */
    if (pd_parallel_active() || macs < 2.0 * PD_PARALLEL_MIN_WORK) nt = 1;
    /* split the longer side: each task packs all of the other operand. A row-major A is read
     * in place, never packed, so there columns are split whenever there are enough of them:
     * each task packs only its own part of B. */
    j.split_rows = M >= N;
    if (q->csa == 1 && q->rsa != 1 && N / (size_t)j.p->nr >= nt) j.split_rows = 0;
    const size_t len = j.split_rows ? M : N, unit = (size_t)(j.split_rows ? j.p->mr : j.p->nr);
    if (nt > len / unit) nt = len / unit ? len / unit : 1;
    j.step = round_up((len + nt - 1) / nt, unit);
    const size_t tasks = (len + j.step - 1) / j.step;
    if (tasks <= 1) {
        gemm_task(&j, 0, 1);
        return;
    }
    pd_csum local[8]; /* B's checksum parts, merged after the join (no part without memory) */
    if (q->bsum) j.parts = tasks <= 8 ? local : malloc(tasks * sizeof *j.parts);
    if (!j.parts) j.prod.bsum = NULL;
    for (size_t t = 0; j.parts && t < tasks; t++) pd_csum_init(&j.parts[t], q->bsum->base);
    pd_parallel_for(tasks, 1, gemm_task, &j);
    for (size_t t = 0; j.parts && t < tasks; t++) pd_csum_merge(q->bsum, &j.parts[t]);
    if (j.parts != local) free(j.parts);
}

void pd_mm_nn(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc) {
    const pd_product q = {M, K, N, A, lda, 1, B, ldb, 1, C, ldc, acc, NULL, NULL, 0};
    gemm(&q);
}

void pd_mm_nt(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc) {
    const pd_product q = {M, K, N, A, lda, 1, B, 1, ldb, C, ldc, acc, NULL, NULL, 0};
    gemm(&q);
}

void pd_mm_nn_sum(size_t M, size_t K, size_t N, const double *A, size_t lda,
                  const double *B, size_t ldb, double *C, size_t ldc, int acc, struct pd_csum_s *bsum) {
    const pd_product q = {M, K, N, A, lda, 1, B, ldb, 1, C, ldc, acc, bsum, NULL, 0};
    gemm(&q);
}

void pd_mm_nt_sum(size_t M, size_t K, size_t N, const double *A, size_t lda,
                  const double *B, size_t ldb, double *C, size_t ldc, int acc, struct pd_csum_s *bsum) {
    const pd_product q = {M, K, N, A, lda, 1, B, 1, ldb, C, ldc, acc, bsum, NULL, 0};
    gemm(&q);
}

void pd_mm_tn(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc) {
    const pd_product q = {M, K, N, A, 1, lda, B, ldb, 1, C, ldc, acc, NULL, NULL, 0};
    gemm(&q);
}

void pd_b_panels_pack(pd_b_panels *b, size_t K, size_t N, const double *B, size_t ldb) {
    const pd_gemm_path *p = current_path();
    const size_t nr = (size_t)p->nr, npad = round_up(N, nr);
    *b = (pd_b_panels){p, K, N, npad, ldb, B, NULL};
    if (K == 0 || N == 0 || npad > SIZE_MAX / sizeof(double) / K) return;
    b->panels = pd_aligned_alloc(64, K * npad * sizeof(double));
    for (size_t pc = 0; b->panels && pc < K; pc += p->kc) {
        const size_t kb = K - pc < p->kc ? K - pc : p->kc;
        const b_block blk = {B + pc * ldb, ldb, 1, kb, N};
        for (size_t j = 0; j < N; j += nr) pack_b(p, &blk, j, b->panels + panel_offset(npad, pc, j, kb), NULL);
    }
}

void pd_b_panels_free(pd_b_panels *b) {
    pd_aligned_free(b->panels);
    b->panels = NULL;
}

void pd_mm_tn_panels(size_t M, const double *A, size_t lda, const pd_b_panels *b, double *C, size_t ldc,
                     int acc) {
    const pd_product q = {M, b->K, b->N, A, 1, lda, b->B, b->ldb, 1, C, ldc, acc, NULL, b, 0};
    gemm(&q);
}
