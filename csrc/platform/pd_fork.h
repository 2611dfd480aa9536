/* SPDX-License-Identifier: MIT */
/* Fork safety of the core (pd_fork.c): one at-fork handler runs the hooks every part that holds
 * a lock registered, so the platform calls up into no part. */
#ifndef PD_FORK_H
#define PD_FORK_H

/* Which parts' locks a fork takes first: a part that holds its lock while it waits for work
 * that takes other parts' locks (the thread pool, whose tasks take the buffer pool's) is OUTER;
 * a part whose lock is held only briefly, inside any task, is INNER. */
typedef enum { PD_FORK_OUTER = 0, PD_FORK_INNER = 1, PD_FORK_ORDERS } pd_fork_order;

/* Most parts the registry holds; a registration past them returns 0 and is not run. */
#define PD_FORK_MAX_PARTS 8

/* Registers a part's hooks: before a fork, prepare takes the part's locks (OUTER parts first,
 * then in registration order); after it, parent (in the parent) or child (in the child, whose
 * only thread is the one that forked) releases them, in the reverse order. A part registers
 * once (pd_once_run), before its first lock. Returns 1, or 0 when the registry is full. */
int pd_fork_register(pd_fork_order order, void (*prepare)(void), void (*parent)(void),
                     void (*child)(void));

#endif
