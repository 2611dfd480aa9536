/* SPDX-License-Identifier: MIT */
/* Reusable large buffers. glibc serves big requests with fresh mmap pages, so every forward
 * and backward paid a page fault (and a kernel page clear) per 4 KiB of its arenas; freed
 * buffers are parked here and handed to the next request of a similar size instead. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pd_buffer.h"
#include "platform/pd_fork.h"
#include "pd_tensor.h"
#include "platform/pd_alloc.h"
#include "platform/pd_thread.h"

#define PD_BUF_SLOTS 8
/* smaller buffers come cheaply from malloc; from 64 KiB on, each glibc free of a step's arena
 * also consolidated the heap (benchmarks/KERNELS.md) */
#define PD_BUF_MIN_BYTES (16u * 1024u)
#define PD_BUF_HEADER 64                /* keeps the payload 64-byte aligned */

static pd_mutex g_mu = PD_MUTEX_INIT;
static void *g_slot[PD_BUF_SLOTS]; /* raw blocks; their capacity is in the header */
static size_t g_cap[PD_BUF_SLOTS];
static unsigned long g_age[PD_BUF_SLOTS], g_clock;

static size_t *header(void *raw) { return raw; }

/* Parked blocks no request took back while PD_BUF_SLOTS others were parked are stale: the work
 * they served has moved on. Freed (under g_mu) on a miss and on a put, so a shape given up
 * holds no memory for long, while blocks that take turns (the arenas of a loop that builds the
 * next step's forward before dropping the last one) keep their place. */
static void release_stale(void) {
    for (int i = 0; i < PD_BUF_SLOTS; i++)
        if (g_slot[i] && g_age[i] + PD_BUF_SLOTS < g_clock) {
            pd_aligned_free(g_slot[i]);
            g_slot[i] = NULL;
        }
}

/* A fork while another thread holds g_mu would leave the child's copy locked forever. */
static void fork_prepare(void) { pd_mutex_lock(&g_mu); }
static void fork_release(void) { pd_mutex_unlock(&g_mu); }
static pd_once g_fork_once = PD_ONCE_INIT;
static void fork_register(void) { pd_fork_register(PD_FORK_INNER, fork_prepare, fork_release, fork_release); }

double *pd_buf_get(size_t n, int zero, pd_error *e) {
    size_t bytes;
    if (!pd_mul_ok(n ? n : 1, sizeof(double), &bytes) || bytes > SIZE_MAX - PD_BUF_HEADER) {
        pd_fail(e, PD_ERR_OVERFLOW, n, 0.0, -1, -1);
        return NULL;
    }
    void *raw = NULL;
    if (bytes >= PD_BUF_MIN_BYTES) {
        pd_once_run(&g_fork_once, fork_register);
        pd_mutex_lock(&g_mu);
        int best = -1;
        /* best fit that wastes at most a quarter of the parked block */
        for (int i = 0; i < PD_BUF_SLOTS; i++)
            if (g_slot[i] && g_cap[i] >= bytes && bytes >= g_cap[i] - g_cap[i] / 4 &&
                (best < 0 || g_cap[i] < g_cap[best]))
                best = i;
        if (best >= 0) {
            raw = g_slot[best];
            g_slot[best] = NULL;
        } else {
            release_stale(); /* a miss may mean the working set changed: drop what it left behind */
        }
        pd_mutex_unlock(&g_mu);
        if (raw && zero) memset((char *)raw + PD_BUF_HEADER, 0, bytes);
    }
    if (!raw) {
        raw = pd_aligned_alloc(64, PD_BUF_HEADER + bytes);
        if (!raw) {
            pd_fail(e, PD_ERR_ALLOC, n, 0.0, -1, -1);
            return NULL;
        }
        header(raw)[0] = bytes;
        if (zero) memset((char *)raw + PD_BUF_HEADER, 0, bytes);
    }
    return (double *)((char *)raw + PD_BUF_HEADER);
}

void pd_buf_put(double *p) {
    if (!p) return;
    void *raw = (char *)p - PD_BUF_HEADER;
    const size_t cap = header(raw)[0];
    if (cap < PD_BUF_MIN_BYTES) {
        pd_aligned_free(raw);
        return;
    }
    pd_once_run(&g_fork_once, fork_register);
    pd_mutex_lock(&g_mu);
    int slot = 0;
    for (int i = 0; i < PD_BUF_SLOTS; i++) {
        if (!g_slot[i]) { slot = i; break; }
        if (g_age[i] < g_age[slot]) slot = i; /* else evict the longest parked */
    }
    void *old = g_slot[slot];
    g_slot[slot] = raw;
    g_cap[slot] = cap;
    g_age[slot] = ++g_clock;
    release_stale();
    pd_mutex_unlock(&g_mu);
    pd_aligned_free(old);
}

size_t pd_buf_parked(void) {
    size_t n = 0;
    pd_mutex_lock(&g_mu);
    for (int i = 0; i < PD_BUF_SLOTS; i++) n += g_slot[i] != NULL;
    pd_mutex_unlock(&g_mu);
    return n;
}
