/* SPDX-License-Identifier: MIT */
/* A whole training step in one call, over a graph planned once per batch shape. */
#include <string.h>
#include "pd_step.h"
#include "pd_backward.h"
#include "pd_forward.h"
#include "pd_grad.h"
#include "pd_interrupt.h"
#include "optim/pd_adamw.h"
#include "optim/pd_sgd.h"

pd_status pd_step_sgd(const pd_optim_tensor *t, size_t n, const void *hparams, size_t nh, uint64_t step,
                      pd_error *e) {
    return pd_sgd_step(t, n, (const pd_sgd_hparams *)hparams, nh, step, e);
}

pd_status pd_step_adamw(const pd_optim_tensor *t, size_t n, const void *hparams, size_t nh, uint64_t step,
                        pd_error *e) {
    return pd_adamw_step(t, n, (const pd_adamw_hparams *)hparams, nh, step, e);
}

/* The step's forward in the plan's graph (pd_graph_forward_step plans it per batch shape). */
static pd_status planned_forward(pd_step_plan *plan, const pd_model *m, const pd_step_batch *b, pd_error *e) {
    pd_status st = pd_graph_forward_step(&plan->g, plan->planned, m, &b->in, e);
    plan->planned = st == PD_OK; /* a failed forward has freed the graph */
    return st;
}

/* The reset before the pass: a gradient named by one slot takes its contribution over its old
 * values (PD_PASS_COMMIT_OVER, the bits of a reset first), so only the shared ones, whose
 * slots' contributions add up in them, are zeroed here. */
static void reset_shared(const pd_model *m) {
    for (size_t i = 0; i < m->n_params; i++)
        if (m->shared[i] && !m->params[i]->grad_zero) pd_grad_zero(m->params[i]);
}

pd_status pd_train_step(pd_step_plan *plan, const pd_model *m, const pd_step_batch *batch,
                        const pd_step_update *update, double *loss, int *stage, pd_error *e) {
    *stage = PD_STEP_FORWARD;
    PD_TRY(planned_forward(plan, m, batch, e));
    pd_graph *g = &plan->g;
    *stage = PD_STEP_LOSS;
    PD_TRY(pd_graph_loss(g, batch->targets, e));
    /* the reset after every refusable check of the input, so a refused batch changes nothing */
    reset_shared(m);
    *stage = PD_STEP_BACKWARD;
    const pd_status st = pd_graph_backward_pass(g, 0, NULL, NULL, NULL, NULL, PD_PASS_COMMIT_OVER, e);
    if (st != PD_OK) { /* the reset then a refused pass: +0.0 everywhere, reached by the pass or not */
        pd_grads_zero(m->params, m->n_params);
        return st;
    }
    *loss = g->loss;
    if (!update) return PD_OK;
    /* the passes' last poll: a signal until here stops the step as one in its reverse pass
     * does; past it the update runs whole (the host learns so, pd_interrupt_final) */
    if (pd_interrupt_final()) {
        pd_grads_zero(m->params, m->n_params);
        return pd_fail(e, PD_ERR_INTERRUPTED, 0, 0.0, -1, -1);
    }
    *stage = PD_STEP_UPDATE;
    return update->apply(update->tensors, update->n, update->hparams, update->nh, update->step, e);
}

void pd_step_plan_free(pd_step_plan *plan) {
    if (plan->planned) pd_graph_free(&plan->g);
    memset(plan, 0, sizeof *plan);
}
