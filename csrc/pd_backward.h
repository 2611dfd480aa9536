/* SPDX-License-Identifier: MIT */
/* The reverse pass over a recorded forward (pd_backward.c); its gradient transaction is
 * pd_grad_txn.h. */
#ifndef PD_BACKWARD_H
#define PD_BACKWARD_H
#include <stddef.h>
#include <stdint.h>
#include "pd_decoder.h"
#include "pd_grad_txn.h" /* the pass modes; commit and discard of a waiting pass */

/* One reverse pass from the mean loss. For each selected (block, kind), out[i] (sized like
 * the value) receives its completed adjoint and found[i] = 1, or found[i] = 0 when the value
 * has no adjoint in this graph. Parameter gradients change only if the whole pass succeeds.
 * PD_ERR_STALE (index = parameter) when a revision moved, or (value 1.0) when the values changed
 * without one: something wrote through an alias of the read-only views. */
pd_status pd_graph_backward(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                            double **out, uint8_t *found, pd_error *e);

/* The same pass ending in a PD_PASS_* mode (pd_grad_txn.h); a waiting mode lets the caller
 * check the captured adjoints before committing. A mode outside the enum is PD_PASS_WAIT. */
pd_status pd_graph_backward_pass(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                                 double **out, uint8_t *found, int mode, pd_error *e);

#endif
