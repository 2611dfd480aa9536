/* Persistent pthread pool behind pd_parallel_for. Chunks are handed out dynamically, but each
 * index is processed by exactly one call, so tasks that write only their own outputs give
 * identical results for any thread count. One job runs at a time (callers from several
 * threads queue on a mutex); a pd_parallel_for issued from inside a task runs inline. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "pool.h"

#define PD_MAX_THREADS 1024

static pthread_mutex_t g_use = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  /* guards the job fields below */
static pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_done = PTHREAD_COND_INITIALIZER;
static atomic_int g_threads = 1;
static int g_workers;              /* spawned workers (the caller is the extra thread) */
static unsigned long g_gen;        /* bumped once per job */
static int g_helpers;              /* workers with index < g_helpers take part in this job */
static int g_remaining;            /* helpers that have not finished the current job */
static pd_task_fn g_fn;
static void *g_ctx;
static size_t g_n, g_chunk;
static atomic_size_t g_next;
static _Thread_local int tls_in_task;

static void run_chunks(void) {
    tls_in_task = 1;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&g_next, g_chunk, memory_order_relaxed);
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

static void *worker_main(void *varg) {
    worker_arg arg = *(worker_arg *)varg;
    free(varg);
    const int idx = arg.idx;
    unsigned long seen = arg.gen;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (g_gen == seen) pthread_cond_wait(&g_wake, &g_mu);
        seen = g_gen;
        if (idx >= g_helpers) continue; /* sits this job out */
        pthread_mutex_unlock(&g_mu);
        run_chunks();
        pthread_mutex_lock(&g_mu);
        if (--g_remaining == 0) pthread_cond_signal(&g_done);
    }
    return NULL;
}

/* Called with g_mu held, before the job's g_gen++; returns how many workers exist (may be fewer than asked). */
static int ensure_workers(int want) {
    while (g_workers < want) {
        pthread_t t;
        pthread_attr_t attr;
        worker_arg *arg = malloc(sizeof *arg);
        if (!arg) break;
        arg->idx = g_workers;
        arg->gen = g_gen;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, worker_main, arg);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            free(arg);
            break;
        }
        g_workers++;
    }
    return g_workers < want ? g_workers : want;
}

/* fork() keeps only the calling thread: the child starts with no workers. */
static void atfork_prepare(void) { pthread_mutex_lock(&g_use); pthread_mutex_lock(&g_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_mu); pthread_mutex_unlock(&g_use); }
static void atfork_child(void) {
    g_workers = 0;
    g_helpers = 0;
    g_remaining = 0;
    pthread_cond_init(&g_wake, NULL);
    pthread_cond_init(&g_done, NULL);
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_unlock(&g_use);
}
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void pool_once(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

void pd_set_num_threads(int n) {
    if (n < 1) n = 1;
    if (n > PD_MAX_THREADS) n = PD_MAX_THREADS;
    atomic_store(&g_threads, n);
}

int pd_get_num_threads(void) { return atomic_load(&g_threads); }

int pd_parallel_active(void) { return tls_in_task; }

void pd_parallel_for(size_t n, size_t grain, pd_task_fn fn, void *ctx) {
    if (n == 0) return;
    if (grain == 0) grain = 1;
    const int nt = atomic_load(&g_threads);
    const size_t max_tasks = (n + grain - 1) / grain;
    if (nt <= 1 || tls_in_task || max_tasks <= 1) {
        fn(ctx, 0, n);
        return;
    }
    pthread_once(&g_once, pool_once);
    const int use = (size_t)nt < max_tasks ? nt : (int)max_tasks;
    /* a few chunks per thread balances uneven tasks (causal attention lanes) */
    size_t chunk = n / ((size_t)use * 4);
    if (chunk < grain) chunk = grain;
    pthread_mutex_lock(&g_use);
    pthread_mutex_lock(&g_mu);
    const int helpers = ensure_workers(use - 1);
    g_fn = fn;
    g_ctx = ctx;
    g_n = n;
    g_chunk = chunk;
    atomic_store_explicit(&g_next, 0, memory_order_relaxed);
    g_helpers = helpers;
    g_remaining = helpers;
    g_gen++;
    if (helpers) pthread_cond_broadcast(&g_wake);
    pthread_mutex_unlock(&g_mu);
    run_chunks();
    pthread_mutex_lock(&g_mu);
    while (g_remaining > 0) pthread_cond_wait(&g_done, &g_mu);
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_unlock(&g_use);
}
