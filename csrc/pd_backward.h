/* The reverse pass over a recorded forward (pd_backward.c). */
#ifndef PD_BACKWARD_H
#define PD_BACKWARD_H
#include <stddef.h>
#include <stdint.h>
#include "pd_decoder.h"

/* One reverse pass from the mean loss. For each selected (block, kind), out[i] (sized like
 * the value) receives its completed adjoint and found[i] = 1, or found[i] = 0 when the value
 * has no adjoint in this graph. Parameter gradients change only if the whole pass succeeds.
 * PD_ERR_STALE (index = parameter) when a revision moved, or (value 1.0) when the values changed
 * without one: something wrote through an alias of the read-only views. */
pd_status pd_graph_backward(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                            double **out, uint8_t *found, pd_error *e);

/* The same pass; with commit == 0 the parameter contributions wait on the graph (replacing any
 * earlier waiting pass) so the caller can check the captured adjoints before committing. */
pd_status pd_graph_backward_pass(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                                 double **out, uint8_t *found, int commit, pd_error *e);
/* Adds the waiting pass to the gradients, all or nothing, then drops it; PD_ERR_STALE when a
 * parameter changed since the forward. */
pd_status pd_graph_commit(pd_graph *g, pd_error *e);
/* Drops a waiting pass, if any, leaving the gradients as they are. */
void pd_graph_discard(pd_graph *g);

#endif
