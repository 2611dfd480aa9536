/* SPDX-License-Identifier: MIT */
/* The arena pool (pd_buffer.c): blocks that take turns keep their place across a miss (a loop
 * that builds the next forward before dropping the last one reuses its arenas instead of
 * allocating them every step), and a block no request took back while eight others were
 * parked is freed. Exit status 0 only when both hold. */
#include <stdio.h>
#include "pd_buffer.h"

#define BIG 16208   /* doubles: a graph's arena, above the pooling floor */
#define SMALLER 5408 /* a reverse pass's arena: too small for BIG's block, too big to share it */

static int expect(const char *what, size_t got, size_t want) {
    if (got == want) return 0;
    fprintf(stderr, "%s: %zu parked blocks, expected %zu\n", what, got, want);
    return 1;
}

int main(void) {
    int bad = 0;
    double *graph = pd_buf_get(BIG, 0, NULL), *rev = pd_buf_get(SMALLER, 0, NULL);
    if (!graph || !rev) return 2;
    pd_buf_put(rev);
    /* the next step's forward while the last graph lives: a miss that must keep rev's block */
    double *next = pd_buf_get(BIG, 0, NULL);
    bad |= expect("after a miss", pd_buf_parked(), 1);
    pd_buf_put(graph);
    double *rev2 = pd_buf_get(SMALLER, 0, NULL);
    bad |= expect("reverse arena taken back", pd_buf_parked(), 1);
    bad |= rev2 != rev;
    if (rev2 != rev) fprintf(stderr, "the reverse pass's arena was not reused\n");
    /* graph's block now waits while another block is parked and taken nine times: stale */
    for (int i = 0; i < 9; i++) {
        pd_buf_put(rev2);
        if (i < 8) rev2 = pd_buf_get(SMALLER, 0, NULL);
    }
    bad |= expect("a block left for nine puts", pd_buf_parked(), 1);
    pd_buf_put(next);
    printf("%s\n", bad ? "buffer pool: FAILED" : "buffer pool: ok");
    return bad;
}
