/* SPDX-License-Identifier: MIT */
/* A whole training step in one call (pd_step.c): the recorded forward (every value at small
 * shapes, else what training reads), the loss, the gradients reset and the committing reverse
 * pass, then an optional optimizer update, over a graph planned once per batch shape and kept
 * between steps. */
#ifndef PD_STEP_H
#define PD_STEP_H
#include <stddef.h>
#include <stdint.h>
#include "pd_error.h"
#include "pd_forward.h"
#include "pd_graph.h"
#include "pd_model.h"
#include "optim/pd_optim.h"

/* A model's step plan: a training-mode graph whose buffers the next step of the same shape
 * reuses (planned marks g as holding them). Zero-initialise; free with pd_step_plan_free. */
typedef struct {
    pd_graph g;
    int planned;
} pd_step_plan;

/* One batch: its input (pd_forward.h) and its targets [B*T]. */
typedef struct {
    pd_batch_in in;
    const int64_t *targets;
} pd_step_batch;

/* An update of one optimizer kind over n tensors, hparams as that kind's step reads them. */
typedef pd_status (*pd_step_update_fn)(const pd_optim_tensor *t, size_t n, const void *hparams, size_t nh,
                                       uint64_t step, pd_error *e);
typedef struct {
    pd_step_update_fn apply;
    const pd_optim_tensor *tensors;
    size_t n, nh;
    const void *hparams;
    uint64_t step; /* the update's 1-based count, as the optimizer's own step passes it */
} pd_step_update;

/* The update functions of the two optimizer kinds, in pd_step_update_fn's form. */
pd_status pd_step_sgd(const pd_optim_tensor *t, size_t n, const void *hparams, size_t nh, uint64_t step,
                      pd_error *e);
pd_status pd_step_adamw(const pd_optim_tensor *t, size_t n, const void *hparams, size_t nh, uint64_t step,
                        pd_error *e);

/* Where a step stopped, so the caller words a refusal as the separate call would. */
enum { PD_STEP_FORWARD = 0, PD_STEP_LOSS, PD_STEP_BACKWARD, PD_STEP_UPDATE };

/* Forward (recorded as pd_graph_forward_step records it), loss, every gradient of m to +0.0,
 * committing reverse pass, then update when not NULL: the same bits as those calls one after another. The reset and the pass
 * are one: the pass writes over the gradients (PD_PASS_COMMIT_OVER), only shared ones zeroed. The caller holds m's
 * gradient lock alone. A refusal in the forward or the loss changes nothing; one in the reverse
 * pass leaves the gradients +0.0 (as the reset followed by the refused pass), and so does an
 * interrupt at the final poll between the pass and the update (pd_interrupt_final: the last
 * point where the step stops); one in the update leaves the gradients committed and no value or
 * slot changed. *stage names the stage that stopped; *loss is the mean loss on success. */
pd_status pd_train_step(pd_step_plan *plan, const pd_model *m, const pd_step_batch *batch,
                        const pd_step_update *update, double *loss, int *stage, pd_error *e);
/* Frees the planned graph (a zeroed plan stays valid to free again). */
void pd_step_plan_free(pd_step_plan *plan);

#endif
