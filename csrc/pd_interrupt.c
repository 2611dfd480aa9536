/* SPDX-License-Identifier: MIT */
/* The host installs one check (Python: pending signals on the main thread); C polls it. */
#include "pd_interrupt.h"

static pd_interrupt_fn g_check;

void pd_set_interrupt_check(pd_interrupt_fn fn) { g_check = fn; }

int pd_interrupt_requested(void) { return g_check ? g_check() != 0 : 0; }
