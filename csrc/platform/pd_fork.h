/* SPDX-License-Identifier: MIT */
/* Fork safety of the core (pd_fork.c): one at-fork handler for every lock the core holds. */
#ifndef PD_FORK_H
#define PD_FORK_H

/* Registers the handler once (idempotent, cheap): the pool and the buffer pool call it before
 * their first lock, so a process that forks has it registered before any lock can be held. */
void pd_fork_guard(void);

/* The parts' own hooks, called only by pd_fork.c in its fixed order. */
void pd_pool_atfork_prepare(void);
void pd_pool_atfork_parent(void);
void pd_pool_atfork_child(void);
void pd_buf_atfork_prepare(void);
void pd_buf_atfork_parent(void);
void pd_buf_atfork_child(void);

#endif
