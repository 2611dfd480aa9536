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
/* Whether g holds the buffers of a recorded forward of m over B x T in this record mode, so
 * pd_graph_forward_again may run in them. */
int pd_graph_fits(const pd_graph *g, const pd_model *m, size_t B, size_t T, int record);
/* pd_graph_forward again in the buffers of a recorded g that fits (same bits: every buffer is
 * written before it is read); its loss and any waiting pass are dropped. On failure g is freed. */
pd_status pd_graph_forward_again(pd_graph *g, const int64_t *ids, const uint8_t *valid, const size_t *pos,
                                 const size_t *seg_start, pd_error *e);
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
