/* SPDX-License-Identifier: MIT */
/* The forward pass into a graph (pd_graph.h), the tied head, the loss and the id-range rule
 * (pd_forward.c). */
#ifndef PD_FORWARD_H
#define PD_FORWARD_H
#include <stddef.h>
#include <stdint.h>
#include "pd_error.h"
#include "pd_graph.h"
#include "pd_model.h"

/* Runs the forward pass. valid/pos/seg_start may be NULL for one full segment per row. */
pd_status pd_graph_forward(pd_graph *g, const pd_model *m, size_t B, size_t T, const int64_t *ids,
                           const uint8_t *valid, const size_t *pos, const size_t *seg_start,
                           int record, pd_error *e);
/* One batch's input: ids [B*T]; valid, pos, seg_start NULL for one full segment a row. */
typedef struct {
    size_t B, T;
    const int64_t *ids;
    const uint8_t *valid;
    const size_t *pos, *seg_start;
} pd_batch_in;

/* The recorded forward over `in` of a step whose one committing reverse pass runs before
 * any other call on the model can (pd_train_step, holding the model's lock alone throughout): in
 * g's buffers when g was planned (planned != 0) by an earlier call for the same m and B x T,
 * else in new ones (the old freed first). Nothing can write the values between this forward and
 * that pass, so it takes no value checksums (docs/numerics-concurrency.md C5); the revisions are
 * still compared. It records every value while that takes little memory, else it is lean
 * (PD_RECORD_TRAINING): the same bits as pd_graph_forward in either mode. On failure g is freed. */
pd_status pd_graph_forward_step(pd_graph *g, int planned, const pd_model *m, const pd_batch_in *in,
                                pd_error *e);
/* Whether a token or target id lies in [0, V): the one range rule for ids. */
static inline int pd_id_in_range(int64_t id, size_t V) { return id >= 0 && (uint64_t)id < V; }
/* The same refusal the forward (tokens) or the loss (targets != 0) gives for the first id out of
 * range among n ids (read only where valid[p], when valid is given), without running a model. */
pd_status pd_check_ids(const int64_t *ids, const uint8_t *valid, size_t n, size_t V, int targets,
                       pd_error *e);
/* Attaches the valid-target mean NLL; targets [N], read only at valid positions. */
pd_status pd_graph_loss(pd_graph *g, const int64_t *targets, pd_error *e);
/* The tied head into g->logits (docs/numerics.md §5.6); again, by a lean record's reverse pass,
 * once the parameters are known unchanged. 1 when every logit is finite. */
int pd_graph_head(pd_graph *g);

#endif
