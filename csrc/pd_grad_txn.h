/* SPDX-License-Identifier: MIT */
/* A reverse pass's parameter-gradient contributions and how they reach the gradients: all or
 * nothing, now or after the caller's check (pd_grad_txn.c). The reverse pass (pd_backward.c)
 * only fills the contributions. */
#ifndef PD_GRAD_TXN_H
#define PD_GRAD_TXN_H
#include <stdint.h>
#include "pd_decoder.h"

/* How a pass ends. Every mode but PD_PASS_WAIT writes a contribution straight into a gradient
 * known to hold only +0.0 (pd_param.grad_zero), PD_PASS_COMMIT_OVER into any unshared one, and
 * any refusal or drop writes +0.0 back. */
enum {
    PD_PASS_WAIT = 0,      /* contributions wait on the graph in their own buffers (replacing any
                            * earlier waiting pass) until pd_graph_commit or pd_graph_discard */
    PD_PASS_COMMIT = 1,    /* committed before returning */
    PD_PASS_WAIT_IN_PLACE, /* waits like PD_PASS_WAIT but already in the gradients: the caller holds
                            * the gradient lock until pd_graph_commit or pd_graph_discard */
    PD_PASS_COMMIT_OVER    /* commits like PD_PASS_COMMIT, writing each unshared contribution over
                            * whatever its gradient holds: the bits of a reset to +0.0 first, a
                            * refusal leaving those gradients +0.0 (pd_train_step's reset) */
};

/* Which gradients take their contribution directly (pd_grad_txn_open), never a shared one. */
enum {
    PD_DIRECT_NONE = 0,  /* none: every contribution in its own buffer */
    PD_DIRECT_ZEROS = 1, /* those known to hold only +0.0 */
    PD_DIRECT_OVER = 2   /* all: every contribution is fully written before it is read, so the old
                          * values never show (the caller accepts +0.0 back on a refusal) */
};

/* One pass's contribution to each parameter gradient. */
typedef struct pd_grad_txn {
    double **grad;   /* [n_params] */
    uint8_t *direct; /* [n_params]: grad[i] is the parameter's own all-(+0.0) gradient */
    uint8_t *settled; /* [n_params]: PD_SETTLED when a direct contribution was committed early,
                       * with PD_SETTLED_BAD when a result was not finite */
    int eager;        /* the pass commits before returning: complete contributions may settle */
    double *arena;    /* the buffers of the contributions that are not direct */
} pd_grad_txn;

enum { PD_SETTLED = 1, PD_SETTLED_BAD = 2 };

/* Buffers for every contribution, not zeroed. A parameter named by no other slot takes its
 * contribution in its gradient as direct (PD_DIRECT_*) allows. */
pd_status pd_grad_txn_open(pd_grad_txn *t, const pd_model *m, int direct, pd_error *e);
/* Commits direct contribution i now, while its values are still in cache, when the pass commits
 * before returning and nothing writes the contribution again: the commit's own loop and bits,
 * its finiteness kept for the commit's check. Anything else is left to the commit. */
void pd_grad_txn_settle(pd_grad_txn *t, const pd_model *m, size_t i);
/* Whether contribution i settles early (the pass commits before returning, i is direct). */
int pd_grad_txn_settles(const pd_grad_txn *t, size_t i);
/* The same loop over elements [begin, end) of such a contribution, on the pool; 1 when a result
 * is not finite. The caller marks it settled (pd_grad_txn_mark) once every element is final. */
int pd_grad_txn_settle_range(const pd_grad_txn *t, size_t i, size_t begin, size_t end);
void pd_grad_txn_mark(pd_grad_txn *t, size_t i, int bad);
/* Ends a pass that returned st: a failed pass is dropped; a finished one commits (t->eager) or
 * waits on g. t is spent either way. */
pd_status pd_grad_txn_end(pd_graph *g, pd_grad_txn *t, pd_status st, pd_error *e);

/* A loss attached, the intermediate values recorded, and no parameter changed since the forward:
 * PD_ERR_STALE (index = parameter) when a revision moved, or (value 1.0) when the values changed
 * without one (not asked of an unguarded record, which has no checksums). */
pd_status pd_graph_fresh(const pd_graph *g, pd_error *e);
/* pd_graph_fresh's first half: a loss, a record and every revision unchanged. */
pd_status pd_graph_current(const pd_graph *g, pd_error *e);
/* Its second half: every parameter's checksum equals the forward's, PD_ERR_STALE (value 1.0)
 * naming the first that does not; gathered (or NULL: a pass over every parameter) holds the
 * terms a reverse pass's products added while packing (pd_checksum.h). */
struct pd_csum_s;
pd_status pd_graph_same_values(const pd_graph *g, struct pd_csum_s *gathered, pd_error *e);
/* Adds the waiting pass to the gradients, all or nothing, then drops it; PD_ERR_STALE when a
 * parameter changed since the forward. */
pd_status pd_graph_commit(pd_graph *g, pd_error *e);
/* Drops a waiting pass, if any, leaving the gradients as they were before it. */
void pd_graph_discard(pd_graph *g);

#endif
