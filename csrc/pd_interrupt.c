/* SPDX-License-Identifier: MIT */
/* The host installs one check (Python: pending signals on the main thread); C polls it. */
#include "pd_interrupt.h"

static pd_interrupt_fn g_check;

void pd_set_interrupt_check(pd_interrupt_fn fn) { g_check = fn; }

pd_interrupt_fn pd_get_interrupt_check(void) { return g_check; }

int pd_interrupt_requested(void) { return g_check ? g_check(0) != 0 : 0; }

int pd_interrupt_final(void) { return g_check ? g_check(1) != 0 : 0; }
