/* The reverse pass over a recorded forward (pd_backward.c). */
#ifndef PD_BACKWARD_H
#define PD_BACKWARD_H
#include <stddef.h>
#include <stdint.h>
#include "pd_decoder.h"

/* One reverse pass from the mean loss. For each selected (block, kind), out[i] (sized like
 * the value) receives its completed adjoint and found[i] = 1, or found[i] = 0 when the value
 * has no adjoint in this graph. Parameter gradients change only if the whole pass succeeds. */
pd_status pd_graph_backward(pd_graph *g, size_t n_sel, const int *sel_block, const int *sel_kind,
                            double **out, uint8_t *found, pd_error *e);

#endif
