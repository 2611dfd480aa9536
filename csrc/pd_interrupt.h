/* SPDX-License-Identifier: MIT */
/* A pending-interrupt check that long C loops call between decoder blocks. */
#ifndef PD_INTERRUPT_H
#define PD_INTERRUPT_H

/* Returns nonzero when the caller asked to stop; the loop then returns PD_ERR_INTERRUPTED. */
typedef int (*pd_interrupt_fn)(void);

/* Installs the check (NULL: never interrupted); set once, before any computation. */
void pd_set_interrupt_check(pd_interrupt_fn fn);
int pd_interrupt_requested(void);

#endif
