/* SPDX-License-Identifier: MIT */
/* pd_thread.h over Win32: SRW locks, condition variables, INIT_ONCE and fiber-local storage
 * (whose callback frees a thread's slot at thread exit, like a pthread key destructor). */
#include "pd_thread.h"
#if defined(_WIN32)
#include <process.h>
#include <stdlib.h>

void pd_mutex_lock(pd_mutex *m) { AcquireSRWLockExclusive(m); }
void pd_mutex_unlock(pd_mutex *m) { ReleaseSRWLockExclusive(m); }
void pd_cond_wait(pd_cond *c, pd_mutex *m) { SleepConditionVariableSRW(c, m, INFINITE, 0); }
void pd_cond_signal(pd_cond *c) { WakeConditionVariable(c); }
void pd_cond_broadcast(pd_cond *c) { WakeAllConditionVariable(c); }
void pd_cond_reset(pd_cond *c) { InitializeConditionVariable(c); }

static BOOL CALLBACK once_thunk(PINIT_ONCE once, PVOID param, PVOID *ctx) {
    (void)once;
    (void)ctx;
    void (*fn)(void);
    *(void **)&fn = param; /* object-to-function pointer: same size on Windows */
    fn();
    return TRUE;
}
void pd_once_run(pd_once *o, void (*fn)(void)) {
    PVOID param;
    *(void (**)(void))&param = fn;
    InitOnceExecuteOnce(o, once_thunk, param, NULL);
}

typedef struct {
    void (*fn)(void *);
    void *arg;
} start_args;

static unsigned __stdcall thread_start(void *p) {
    start_args s = *(start_args *)p;
    free(p);
    s.fn(s.arg);
    return 0;
}

int pd_thread_spawn(void (*fn)(void *), void *arg) {
    start_args *s = malloc(sizeof *s);
    if (!s) return -1;
    s->fn = fn;
    s->arg = arg;
    /* _beginthreadex, not CreateThread: the C runtime's per-thread state is set up */
    uintptr_t h = _beginthreadex(NULL, 0, thread_start, s, 0, NULL);
    if (h == 0) {
        free(s);
        return -1;
    }
    CloseHandle((HANDLE)h); /* detached: nobody joins */
    return 0;
}

int pd_tls_create(pd_tls_key *key, void (*destructor)(void *)) {
    DWORD k = FlsAlloc((PFLS_CALLBACK_FUNCTION)destructor);
    if (k == FLS_OUT_OF_INDEXES) return -1;
    *key = k;
    return 0;
}
void *pd_tls_get(pd_tls_key key) { return FlsGetValue(key); }
int pd_tls_set(pd_tls_key key, void *value) { return FlsSetValue(key, value) ? 0 : -1; }

void pd_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
    (void)prepare;
    (void)parent;
    (void)child;
}
#else
typedef int pd_thread_win32_unused; /* ISO C wants a non-empty translation unit */
#endif
