/* SPDX-License-Identifier: MIT */
/* pd_rwlock.h: a writer-preferring reader/writer lock from one mutex and one condition variable. */
#include "pd_rwlock.h"
#include <stdlib.h>

pd_rwlock *pd_rwlock_new(void) {
    pd_rwlock *l = (pd_rwlock *)malloc(sizeof *l);
    if (l != NULL) {
        const pd_mutex m = PD_MUTEX_INIT;
        const pd_cond c = PD_COND_INIT;
        l->m = m;
        l->c = c;
        l->readers = 0;
        l->writers_waiting = 0;
        l->writer = 0;
    }
    return l;
}

void pd_rwlock_free(pd_rwlock *l) { free(l); }

void pd_rwlock_lock_shared(pd_rwlock *l) {
    pd_mutex_lock(&l->m);
    while (l->writer || l->writers_waiting)
        pd_cond_wait(&l->c, &l->m);
    l->readers++;
    pd_mutex_unlock(&l->m);
}

void pd_rwlock_unlock_shared(pd_rwlock *l) {
    pd_mutex_lock(&l->m);
    if (--l->readers == 0)
        pd_cond_broadcast(&l->c);
    pd_mutex_unlock(&l->m);
}

void pd_rwlock_lock(pd_rwlock *l) {
    pd_mutex_lock(&l->m);
    l->writers_waiting++;
    while (l->writer || l->readers)
        pd_cond_wait(&l->c, &l->m);
    l->writers_waiting--;
    l->writer = 1;
    pd_mutex_unlock(&l->m);
}

void pd_rwlock_unlock(pd_rwlock *l) {
    pd_mutex_lock(&l->m);
    l->writer = 0;
    pd_cond_broadcast(&l->c);
    pd_mutex_unlock(&l->m);
}

void pd_rwlock_reset(pd_rwlock *l) {
    const pd_mutex m = PD_MUTEX_INIT;
    l->m = m;
    pd_cond_reset(&l->c);
    l->readers = 0;
    l->writers_waiting = 0;
    l->writer = 0;
}
