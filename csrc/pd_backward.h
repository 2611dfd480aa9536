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

/* How a pass ends. Every mode writes a contribution straight into a gradient known to hold only
 * +0.0 (pd_param.grad_zero) except PD_PASS_WAIT, and any refusal or drop writes +0.0 back. */
enum {
    PD_PASS_WAIT = 0,     /* contributions wait on the graph in their own buffers (replacing any
                           * earlier waiting pass) until pd_graph_commit or pd_graph_discard */
    PD_PASS_COMMIT = 1,   /* committed before returning */
    PD_PASS_WAIT_IN_PLACE /* waits like PD_PASS_WAIT but already in the gradients: the caller holds
                           * the gradient lock until pd_graph_commit or pd_graph_discard */
};

/* The same pass; a waiting mode lets the caller check the captured adjoints before committing.
 * A mode outside the enum is PD_PASS_WAIT. */
pd_status pd_graph_backward_pass(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                                 double **out, uint8_t *found, int mode, pd_error *e);
/* Adds the waiting pass to the gradients, all or nothing, then drops it; PD_ERR_STALE when a
 * parameter changed since the forward. */
pd_status pd_graph_commit(pd_graph *g, pd_error *e);
/* Drops a waiting pass, if any, leaving the gradients as they were before it. */
void pd_graph_discard(pd_graph *g);

#endif
