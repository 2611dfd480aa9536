/* SPDX-License-Identifier: MIT */
/* The one owner of fork(): the registry of the parts' at-fork hooks and the handler that runs
 * them. Before a fork the OUTER parts known so far are taken first: once the pool's locks are
 * held no task runs, so no registrar can be inside one; only then does the handler take the
 * registrars' mutex (a registrar waiting on it holds no lock), and with it every other part. */
#include "pd_fork.h"
#include "pd_atomic.h"
#include "pd_thread.h"

typedef struct {
    pd_fork_order order;
    void (*hook[3])(void); /* prepare, parent, child */
} fork_part;
enum { PREPARE = 0, PARENT = 1, CHILD = 2 };

static fork_part g_parts[PD_FORK_MAX_PARTS];
static pd_atomic_int g_count; /* parts published: their rows are written before the count */
static int g_forking;         /* parts a fork prepared: its parent and child hooks release these */
static pd_mutex g_registrars = PD_MUTEX_INIT;
static pd_once g_once = PD_ONCE_INIT;

/* Runs hook `which` of the parts in [from, to) of the given order, forward or in reverse. */
static void run(int from, int to, pd_fork_order order, int which, int reverse) {
    for (int k = 0; k < to - from; k++) {
        const fork_part *p = &g_parts[reverse ? to - 1 - k : from + k];
        if (p->order == order) p->hook[which]();
    }
}

static void prepare(void) {
    const int early = pd_atomic_int_load(&g_count);
    run(0, early, PD_FORK_OUTER, PREPARE, 0);
    pd_mutex_lock(&g_registrars); /* a part registering from here on waits for the fork */
    g_forking = pd_atomic_int_load(&g_count);
    run(early, g_forking, PD_FORK_OUTER, PREPARE, 0);
    run(0, g_forking, PD_FORK_INNER, PREPARE, 0);
}

/* Releases what prepare took, in the reverse order. */
static void release(int which) {
    run(0, g_forking, PD_FORK_INNER, which, 1);
    run(0, g_forking, PD_FORK_OUTER, which, 1);
    pd_mutex_unlock(&g_registrars);
}
static void parent(void) { release(PARENT); }
static void child(void) { release(CHILD); }

static void install(void) { pd_atfork(prepare, parent, child); }

int pd_fork_register(pd_fork_order order, void (*prep)(void), void (*par)(void), void (*chi)(void)) {
    pd_once_run(&g_once, install);
    pd_mutex_lock(&g_registrars);
    const int n = pd_atomic_int_load(&g_count);
    const int ok = n < PD_FORK_MAX_PARTS;
    if (ok) {
        g_parts[n] = (fork_part){order, {prep, par, chi}};
        pd_atomic_int_store(&g_count, n + 1);
    }
    pd_mutex_unlock(&g_registrars);
    return ok;
}
