/* SPDX-License-Identifier: MIT */
/* The one owner of fork(): before the fork every lock of the core is taken, after it the parent
 * releases them and the child (whose only thread is the one that forked) releases them and
 * starts with an empty thread pool. The pool goes first: its jobs' tasks take the buffer lock,
 * so holding that lock while waiting for a job to finish could wait forever. */
#include "pd_fork.h"
#include "pd_thread.h"

static void prepare(void) {
    pd_pool_atfork_prepare();
    pd_buf_atfork_prepare();
}
static void parent(void) {
    pd_buf_atfork_parent();
    pd_pool_atfork_parent();
}
static void child(void) {
    pd_buf_atfork_child();
    pd_pool_atfork_child();
}

static pd_once g_once = PD_ONCE_INIT;
static void install(void) { pd_atfork(prepare, parent, child); }

void pd_fork_guard(void) { pd_once_run(&g_once, install); }
