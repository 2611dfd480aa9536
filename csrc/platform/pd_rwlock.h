/* SPDX-License-Identifier: MIT */
/* A lock shared by readers (forwards) and held alone by writers (steps, reverse passes, value
 * and gradient changes), over pd_thread.h's mutex and condition variable (pd_rwlock.c). A
 * waiting writer holds back new readers, so a stream of forwards never starves a step. */
#ifndef PD_RWLOCK_H
#define PD_RWLOCK_H
#include <stddef.h>
#include "pd_thread.h"

typedef struct pd_rwlock {
    pd_mutex m;
    pd_cond c;
    size_t readers;         /* holders in shared mode */
    size_t writers_waiting; /* callers of pd_rwlock_lock not yet holding it */
    int writer;             /* 1 while a writer holds it */
} pd_rwlock;

/* A new unlocked lock, or NULL when memory is short. */
pd_rwlock *pd_rwlock_new(void);
void pd_rwlock_free(pd_rwlock *l);
void pd_rwlock_lock_shared(pd_rwlock *l);
void pd_rwlock_unlock_shared(pd_rwlock *l);
void pd_rwlock_lock(pd_rwlock *l);
void pd_rwlock_unlock(pd_rwlock *l);
/* A forked child's copy back to unlocked: the threads that held or awaited it do not exist there. */
void pd_rwlock_reset(pd_rwlock *l);

#endif
