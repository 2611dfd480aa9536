/* SPDX-License-Identifier: MIT */
/* A pending-interrupt check that long C loops call between decoder blocks. */
#ifndef PD_INTERRUPT_H
#define PD_INTERRUPT_H

/* Returns nonzero when the caller asked to stop; the loop then returns PD_ERR_INTERRUPTED.
 * final is nonzero at a call's last poll (pd_interrupt_final): when it returns 0 the host
 * knows the rest of the call runs to its end. */
typedef int (*pd_interrupt_fn)(int final);

/* Installs the check (NULL: never interrupted); set once, before any computation. */
void pd_set_interrupt_check(pd_interrupt_fn fn);
/* The installed check (a test's probe wraps it). */
pd_interrupt_fn pd_get_interrupt_check(void);
int pd_interrupt_requested(void);
/* The last poll of a call whose rest is all or nothing (a training step before its update):
 * as pd_interrupt_requested, the host told that no poll follows. */
int pd_interrupt_final(void);

#endif
