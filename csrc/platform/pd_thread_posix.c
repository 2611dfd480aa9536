/* SPDX-License-Identifier: MIT */
/* pd_thread.h over POSIX threads (Linux glibc and musl, macOS). */
#include "pd_thread.h"
#if !defined(_WIN32)
#include <stdlib.h>

void pd_mutex_lock(pd_mutex *m) { pthread_mutex_lock(m); }
void pd_mutex_unlock(pd_mutex *m) { pthread_mutex_unlock(m); }
void pd_cond_wait(pd_cond *c, pd_mutex *m) { pthread_cond_wait(c, m); }
void pd_cond_signal(pd_cond *c) { pthread_cond_signal(c); }
void pd_cond_broadcast(pd_cond *c) { pthread_cond_broadcast(c); }
void pd_cond_reset(pd_cond *c) { pthread_cond_init(c, NULL); }
void pd_once_run(pd_once *o, void (*fn)(void)) { pthread_once(o, fn); }

typedef struct {
    void (*fn)(void *);
    void *arg;
} start_args;

static void *thread_start(void *p) {
    start_args s = *(start_args *)p;
    free(p);
    s.fn(s.arg);
    return NULL;
}

int pd_thread_spawn(void (*fn)(void *), void *arg) {
    start_args *s = malloc(sizeof *s);
    if (!s) return -1;
    s->fn = fn;
    s->arg = arg;
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0) {
        free(s);
        return -1;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    const int rc = pthread_create(&t, &attr, thread_start, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) free(s);
    return rc != 0 ? -1 : 0;
}

int pd_tls_create(pd_tls_key *key, void (*destructor)(void *)) {
    return pthread_key_create(key, destructor) == 0 ? 0 : -1;
}
void *pd_tls_get(pd_tls_key key) { return pthread_getspecific(key); }
int pd_tls_set(pd_tls_key key, void *value) { return pthread_setspecific(key, value) == 0 ? 0 : -1; }

void pd_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
    pthread_atfork(prepare, parent, child);
}
#else
typedef int pd_thread_posix_unused; /* ISO C wants a non-empty translation unit */
#endif
