/* SPDX-License-Identifier: MIT */
/* Persistent thread pool (pthreads or Win32 through platform/pd_thread.h) behind pd_parallel_for. Chunks are handed out dynamically, but each
 * index is processed by exactly one call, so tasks that write only their own outputs give
 * identical results for any thread count. One job runs at a time (callers from several
 * threads queue on a mutex); a pd_parallel_for issued from inside a task runs inline.
 * A helper that wakes after the caller has taken every chunk sits the job out: the caller
 * waits only for helpers that joined, never for one the scheduler has not run yet.
 * Between jobs a helper spins briefly before it sleeps, and the caller spins briefly before it
 * waits: the products of one training step come back to back, and a futex wake-up per job
 * cost more than the whole job at mid-size shapes. */
#include <stdlib.h>
#include "pool.h"
#include "../platform/pd_fork.h"
#include "../platform/pd_atomic.h"
#include "../platform/pd_platform.h"
#include "../platform/pd_thread.h"

#define PD_MAX_THREADS 1024

static pd_mutex g_use = PD_MUTEX_INIT; /* one job at a time */
static pd_mutex g_mu = PD_MUTEX_INIT;  /* guards the job fields below */
static pd_cond g_wake = PD_COND_INIT;
static pd_cond g_done = PD_COND_INIT;
static pd_atomic_int g_threads = 1;
static int g_workers;              /* spawned workers (the caller is the extra thread) */
static unsigned long g_gen;        /* bumped once per job */
static int g_helpers;              /* workers with index < g_helpers take part in this job */
static int g_open;                 /* the current job still admits helpers */
static pd_atomic_int g_active;     /* helpers in the current job (changed under g_mu, read by spins) */
static pd_atomic_int g_posted;     /* low bits of g_gen, read by spinning helpers */
static int g_sleeping;             /* helpers blocked on g_wake */

/* Pause-loop trips of one spin (tens of microseconds): longer than the gap between the jobs of
 * one step, far shorter than a scheduler tick of the other processes we would hold off. */
#define PD_SPIN_TRIPS 2048
static pd_task_fn g_fn;
static void *g_ctx;
static size_t g_n, g_chunk;
static pd_atomic_size g_next;
static PD_THREAD_LOCAL int tls_in_task;

static void run_chunks(void) {
    tls_in_task = 1;
    for (;;) {
        size_t i = pd_atomic_size_fetch_add(&g_next, g_chunk);
        if (i >= g_n) break;
        size_t end = g_n - i < g_chunk ? g_n : i + g_chunk;
        g_fn(g_ctx, i, end);
    }
    tls_in_task = 0;
}

typedef struct {
    int idx;
    unsigned long gen; /* the generation before the job that spawned it, so it joins that job */
} worker_arg;

static void worker_main(void *varg) {
    worker_arg arg = *(worker_arg *)varg;
    free(varg);
    const int idx = arg.idx;
    unsigned long seen = arg.gen;
    for (;;) {
        for (int s = 0; s < PD_SPIN_TRIPS && pd_atomic_int_load(&g_posted) == (int)seen; s++) PD_CPU_RELAX();
        pd_mutex_lock(&g_mu);
        while (g_gen == seen) {
            g_sleeping++;
            pd_cond_wait(&g_wake, &g_mu);
            g_sleeping--;
        }
        seen = g_gen;
        if (idx >= g_helpers || !g_open) { /* sits this job out */
            pd_mutex_unlock(&g_mu);
            continue;
        }
        pd_atomic_int_store(&g_active, pd_atomic_int_load(&g_active) + 1);
        pd_mutex_unlock(&g_mu);
        run_chunks();
        pd_mutex_lock(&g_mu);
        const int left = pd_atomic_int_load(&g_active) - 1;
        pd_atomic_int_store(&g_active, left);
        if (left == 0 && !g_open) pd_cond_signal(&g_done);
        pd_mutex_unlock(&g_mu);
    }
}

/* Called with g_mu held, before the job's g_gen++; returns how many workers exist (may be fewer than asked). */
static int ensure_workers(int want) {
    while (g_workers < want) {
        worker_arg *arg = malloc(sizeof *arg);
        if (!arg) break;
        arg->idx = g_workers;
        arg->gen = g_gen;
        if (pd_thread_spawn(worker_main, arg) != 0) {
            free(arg);
            break;
        }
        g_workers++;
    }
    return g_workers < want ? g_workers : want;
}

/* fork() keeps only the calling thread: the child starts with no workers (POSIX only). A job
 * holds g_use while its tasks take other parts' locks, so the pool's locks are taken first. */
static void fork_prepare(void) { pd_mutex_lock(&g_use); pd_mutex_lock(&g_mu); }
static void fork_parent(void) { pd_mutex_unlock(&g_mu); pd_mutex_unlock(&g_use); }
static void fork_child(void) {
    g_workers = 0;
    g_helpers = 0;
    g_open = 0;
    g_sleeping = 0;
    pd_atomic_int_store(&g_active, 0);
    pd_cond_reset(&g_wake);
    pd_cond_reset(&g_done);
    pd_mutex_unlock(&g_mu);
    pd_mutex_unlock(&g_use);
}
static pd_once g_fork_once = PD_ONCE_INIT;
static void fork_register(void) { pd_fork_register(PD_FORK_OUTER, fork_prepare, fork_parent, fork_child); }

void pd_set_num_threads(int n) {
    if (n < 1) n = 1;
    if (n > PD_MAX_THREADS) n = PD_MAX_THREADS;
    pd_atomic_int_store(&g_threads, n);
}

int pd_get_num_threads(void) { return pd_atomic_int_load(&g_threads); }

int pd_parallel_active(void) { return tls_in_task; }

void pd_parallel_for(size_t n, size_t grain, pd_task_fn fn, void *ctx) {
    if (n == 0) return;
    if (grain == 0) grain = 1;
    const int nt = pd_atomic_int_load(&g_threads);
    /* one chunk's work runs inline, tested first: a small step makes dozens of such calls, and
     * the division and the thread-local read cost each of them more at two threads than at one */
    if (nt <= 1 || n <= grain || tls_in_task) {
        fn(ctx, 0, n);
        return;
    }
    const size_t max_tasks = (n + grain - 1) / grain;
    pd_once_run(&g_fork_once, fork_register); /* before the pool's first lock */
    const int use = (size_t)nt < max_tasks ? nt : (int)max_tasks;
    /* a few chunks per thread balances uneven tasks (causal attention lanes) */
    size_t chunk = n / ((size_t)use * 4);
    if (chunk < grain) chunk = grain;
    pd_mutex_lock(&g_use);
    pd_mutex_lock(&g_mu);
    const int helpers = ensure_workers(use - 1);
    g_fn = fn;
    g_ctx = ctx;
    g_n = n;
    g_chunk = chunk;
    pd_atomic_size_store(&g_next, 0);
    g_helpers = helpers;
    g_open = 1;
    pd_atomic_int_store(&g_active, 0);
    g_gen++;
    pd_atomic_int_store(&g_posted, (int)g_gen);
    if (helpers && g_sleeping) pd_cond_broadcast(&g_wake); /* spinning helpers need no wake-up */
    pd_mutex_unlock(&g_mu);
    run_chunks();
    pd_mutex_lock(&g_mu);
    g_open = 0; /* every chunk is taken: late helpers skip this job */
    if (pd_atomic_int_load(&g_active) > 0) { /* a helper finishing its last chunk: spin, then sleep */
        pd_mutex_unlock(&g_mu);
        for (int s = 0; s < PD_SPIN_TRIPS && pd_atomic_int_load(&g_active) > 0; s++) PD_CPU_RELAX();
        pd_mutex_lock(&g_mu);
    }
    while (pd_atomic_int_load(&g_active) > 0) pd_cond_wait(&g_done, &g_mu);
    pd_mutex_unlock(&g_mu);
    pd_mutex_unlock(&g_use);
}
