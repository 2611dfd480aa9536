/* SPDX-License-Identifier: MIT */
/* The next B panel's source lines, asked for while the current panel's tiles compute, so that
 * its packing reads cache instead of waiting on memory. gemm.c aims the cursor and gives each
 * tile a share; the tile asks for its share inside its k loop, one line every few terms, since
 * a burst of them before the tile filled the core's miss buffers and stalled it
 * (benchmarks/KERNELS.md). Hints only: no value depends on them. */
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

/* A tile's share of the cursor, spread over its kc terms: one line after every `every` terms,
 * `left` to go. A kernel runs its terms in spans (pd_line_share_until) and asks for a line
 * between them (pd_line_share_ask), so its inner loop stays as it is. */
typedef struct {
    pd_panel_lines *lines;
    size_t left, every;
} pd_line_share;

/* n lines (n <= kc) of c over kc terms; none when c is NULL or n is 0. */
static inline pd_line_share pd_line_share_of(pd_panel_lines *c, size_t n, size_t kc) {
    pd_line_share s = {c, c ? n : 0, n && kc / n ? kc / n : kc};
    return s;
}

/* Where the span of terms from k ends: `every` terms on while lines are left, else kc. */
static inline size_t pd_line_share_until(const pd_line_share *s, size_t k, size_t kc) {
    return s->left && kc - k > s->every ? k + s->every : kc;
}

/* Between spans: one of the share's lines, while any is left. */
static inline void pd_line_share_ask(pd_line_share *s) {
    if (s->left) {
        s->left--;
        pd_panel_line(s->lines);
    }
}

#endif
