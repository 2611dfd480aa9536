/* SPDX-License-Identifier: MIT */
/* The next B panel's source lines, asked for while the current panel's tiles compute, so that
 * its packing reads cache instead of waiting on memory; and the next tile's C rows, so that its
 * partial sums and stores find them in cache. gemm.c aims the cursors and gives each tile a
 * share; the tile asks for its share inside its k loop, one line every few terms, since a burst
 * of them before the tile filled the core's miss buffers and stalled it (benchmarks/KERNELS.md).
 * Hints only: no value depends on them. */
#ifndef PD_PANEL_LINES_H
#define PD_PANEL_LINES_H
#include <stddef.h>
#include "../platform/pd_platform.h"

/* `rows` stored runs `stride` apart, each `len` doubles long, asked for from run `row`, offset
 * `off` on; rows == 0 asks for nothing. */
typedef struct {
    const double *base;
    size_t stride, rows, len, row, off;
} pd_panel_lines;

/* Asks for the cursor's next line: each run's lines from its start, then its last double (a run
 * need not start on a line boundary); nothing once the runs are done. */
static inline void pd_panel_line(pd_panel_lines *c) {
    if (c->row >= c->rows) return;
    const double *r = c->base + c->row * c->stride;
    if (c->off < c->len) {
        PD_PREFETCH_R(r + c->off);
        c->off += 8; /* one 64-byte line */
    } else {
        PD_PREFETCH_R(r + c->len - 1);
        c->off = 0;
        c->row++;
    }
}

/* The next tile's C: `rows` rows `ld` apart from `base`, each `len` doubles. Each row is asked
 * for by its first and its last double (its one or two lines), for writing; `asked` so far. */
typedef struct {
    double *base;
    size_t ld, rows, len, asked;
} pd_tile_rows;

/* How many asks the rows take: two a row; none for NULL. */
static inline size_t pd_tile_rows_lines(const pd_tile_rows *r) { return r ? 2 * r->rows : 0; }

/* Asks for the rows' next end. */
static inline void pd_tile_rows_ask(pd_tile_rows *r) {
    const size_t i = r->asked++;
    PD_PREFETCH_W(r->base + (i / 2) * r->ld + (i % 2 ? r->len - 1 : 0));
}

/* A tile's share, spread over its kc terms: one line after every `every` terms, `left` to go,
 * the next tile's C rows first (`c_left` of them), then the next panel's. A kernel runs its
 * terms in spans (pd_line_share_until) and asks for a line between them (pd_line_share_ask), so
 * its inner loop stays as it is. */
typedef struct {
    pd_panel_lines *lines;
    pd_tile_rows *c;
    size_t left, c_left, every;
} pd_line_share;

/* All of c's rows and n lines of p over kc terms (gemm.c keeps the sum at most kc); no rows
 * when c is NULL, no lines when p is NULL or n is 0. */
static inline pd_line_share pd_line_share_of(pd_panel_lines *p, size_t n, pd_tile_rows *c, size_t kc) {
    const size_t rows = pd_tile_rows_lines(c), all = rows + (p ? n : 0);
    pd_line_share s = {p, c, all, rows, all && kc / all ? kc / all : kc};
    return s;
}

/* Where the span of terms from k ends: `every` terms on while lines are left, else kc. */
static inline size_t pd_line_share_until(const pd_line_share *s, size_t k, size_t kc) {
    return s->left && kc - k > s->every ? k + s->every : kc;
}

/* Between spans: one of the share's lines, while any is left; C's rows first, since the next
 * tile reads or writes them as soon as it starts or ends, while the next panel's source is read
 * only after the current panel's last tile. */
static inline void pd_line_share_ask(pd_line_share *s) {
    if (!s->left) return;
    s->left--;
    if (s->c_left) {
        s->c_left--;
        pd_tile_rows_ask(s->c);
    } else {
        pd_panel_line(s->lines);
    }
}

#endif
