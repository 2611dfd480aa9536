/* SPDX-License-Identifier: MIT */
/* A thin thread layer: POSIX threads, or Win32 (SRW locks, condition variables, one-time
 * init, fiber-local storage with destructors). Every object below can be statically
 * initialized with its PD_*_INIT, as the pool and the buffer cache need. */
#ifndef PD_THREAD_H
#define PD_THREAD_H

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
typedef SRWLOCK pd_mutex;
typedef CONDITION_VARIABLE pd_cond;
typedef INIT_ONCE pd_once;
typedef DWORD pd_tls_key;
#define PD_MUTEX_INIT SRWLOCK_INIT
#define PD_COND_INIT CONDITION_VARIABLE_INIT
#define PD_ONCE_INIT INIT_ONCE_STATIC_INIT
#else
#include <pthread.h>
typedef pthread_mutex_t pd_mutex;
typedef pthread_cond_t pd_cond;
typedef pthread_once_t pd_once;
typedef pthread_key_t pd_tls_key;
#define PD_MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define PD_COND_INIT PTHREAD_COND_INITIALIZER
#define PD_ONCE_INIT PTHREAD_ONCE_INIT
#endif

/* A spin-wait hint to the CPU (pause / yield), or nothing where there is none. */
#if defined(_WIN32)
#define PD_CPU_RELAX() YieldProcessor()
#elif (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define PD_CPU_RELAX() __builtin_ia32_pause()
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
#define PD_CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define PD_CPU_RELAX() ((void)0)
#endif

void pd_mutex_lock(pd_mutex *m);
void pd_mutex_unlock(pd_mutex *m);
void pd_cond_wait(pd_cond *c, pd_mutex *m);
void pd_cond_signal(pd_cond *c);
void pd_cond_broadcast(pd_cond *c);
/* Re-creates a condition variable (a forked child's copy may be mid-wait). */
void pd_cond_reset(pd_cond *c);
void pd_once_run(pd_once *o, void (*fn)(void));

/* Starts fn(arg) on a new detached thread; returns 0 on success. */
int pd_thread_spawn(void (*fn)(void *), void *arg);

/* Thread-local slot whose destructor runs (with a non-NULL value) when a thread exits;
 * returns 0 on success. */
int pd_tls_create(pd_tls_key *key, void (*destructor)(void *));
void *pd_tls_get(pd_tls_key key);
int pd_tls_set(pd_tls_key key, void *value);

/* fork() handlers where fork exists (POSIX); nothing on Windows. */
void pd_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));

#endif
