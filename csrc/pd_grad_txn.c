/* SPDX-License-Identifier: MIT */
/* The gradient transaction of docs/numerics.md §6.5: a pass's contributions reach the gradients
 * only when every result is finite, and a refused or dropped pass leaves them as it found them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pd_grad_txn.h"
#include "kernels/grad_loops.h"
#include "kernels/pool.h"
#include "pd_buffer.h"
#include "pd_checksum.h"
#include "pd_grad.h"

#define PD_COMMIT_GRAIN 32768 /* elements per chunk of one parameter's check or commit */

/* A direct contribution (written into a gradient of +0.0) commits as grad = 0.0 + c: the bits
 * of (+0.0) + c on the buffered path, -0.0 included. That write is its own check: a refused
 * pass zeroes a direct gradient again (restore_direct). */
typedef struct {
    double *grad;
    const double *adj;
    const pd_grad_loops *loops;
    int direct;
    int bad;
} grad_ctx;

static void grad_check_task(void *vctx, size_t begin, size_t end) {
    grad_ctx *c = vctx;
    const uint64_t any = c->direct ? c->loops->commit_direct(c->grad, begin, end)
                                   : c->loops->check_sum(c->grad, c->adj, begin, end);
    if (any >> 63) c->bad = 1;
}

static void grad_commit_task(void *vctx, size_t begin, size_t end) {
    grad_ctx *c = vctx;
    if (!c->direct) c->loops->commit_sum(c->grad, c->adj, begin, end);
}

typedef struct {
    const pd_model *m;
    const pd_grad_txn *t;
    const pd_grad_loops *loops;
    uint8_t *bad;          /* per parameter */
} commit_ctx;

static grad_ctx grad_ctx_of(const commit_ctx *c, size_t i) {
    grad_ctx gc = {c->m->params[i]->grad, c->t->grad[i], c->loops, c->t->direct[i], 0};
    return gc;
}

/* One parameter's elements: inline below one chunk, else split over the pool. */
static void each_chunk(size_t n, pd_task_fn fn, grad_ctx *gc) {
    if (n <= PD_COMMIT_GRAIN) fn(gc, 0, n);
    else pd_parallel_for(n, PD_COMMIT_GRAIN, fn, gc);
}

/* Parameters [begin, end): each one's elements, split further only when it is large alone. */
static void check_params_task(void *vctx, size_t begin, size_t end) {
    commit_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) {
        const uint8_t settled = c->t->settled[i];
        if (settled) { /* committed early by the same loop: its finding stands */
            c->bad[i] = (uint8_t)((settled & PD_SETTLED_BAD) != 0);
            continue;
        }
        grad_ctx gc = grad_ctx_of(c, i);
        each_chunk(c->m->params[i]->size, grad_check_task, &gc);
        c->bad[i] = (uint8_t)gc.bad;
    }
}

void pd_grad_txn_settle(pd_grad_txn *t, const pd_model *m, size_t i) {
    if (!pd_grad_txn_settles(t, i) || t->settled[i]) return;
    pd_grad_txn_mark(t, i, pd_grad_txn_settle_range(t, i, 0, m->params[i]->size)); /* the whole range */
}

int pd_grad_txn_settles(const pd_grad_txn *t, size_t i) { return t->eager && t->direct[i]; }

int pd_grad_txn_settle_range(const pd_grad_txn *t, size_t i, size_t begin, size_t end) {
    if (!pd_grad_txn_settles(t, i) || end <= begin) return 0;
    grad_ctx gc = {t->grad[i] + begin, NULL, pd_grad_loops_current(), 1, 0};
    each_chunk(end - begin, grad_check_task, &gc);
    return gc.bad;
}

void pd_grad_txn_mark(pd_grad_txn *t, size_t i, int bad) {
    if (pd_grad_txn_settles(t, i)) t->settled[i] = (uint8_t)(PD_SETTLED | (bad ? PD_SETTLED_BAD : 0));
}

static void commit_params_task(void *vctx, size_t begin, size_t end) {
    commit_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) {
        if (c->t->direct[i]) continue; /* committed by its check */
        grad_ctx gc = grad_ctx_of(c, i);
        each_chunk(c->m->params[i]->size, grad_commit_task, &gc);
    }
}

/* PD_ERR_NONFINITE naming the first offending element, in order, of a parameter found bad. */
static pd_status first_nonfinite(const pd_model *m, const pd_grad_txn *t, size_t i, pd_error *e) {
    const pd_param *q = m->params[i];
    for (size_t x = 0; x < q->size; x++) {
        const double c = t->grad[i][x];
        const double nv = t->direct[i] ? q->grad[x] : q->grad[x] + c; /* direct: 0.0 + c already */
        if (!isfinite(c) || !isfinite(nv)) return pd_fail(e, PD_ERR_NONFINITE, x, nv, (int)i, PD_N_GRADIENT);
    }
    return PD_OK;
}

/* Adds every contribution to its stored gradient, only when every result is finite. The
 * parameters go to the pool as one job: most are too small to split on their own. A committed
 * gradient is no longer known to be +0.0. */
static pd_status txn_commit(const pd_model *m, const pd_grad_txn *t, pd_error *e) {
    const size_t np = m->n_params;
    size_t total = 0;
    for (size_t i = 0; i < np; i++) total += m->params[i]->size;
    const size_t grain = total >= 2 * PD_COMMIT_GRAIN ? 1 : (np ? np : 1);
    uint8_t *bad = calloc(np ? np : 1, 1);
    if (!bad) return pd_fail(e, PD_ERR_ALLOC, np, 0.0, -1, -1);
    commit_ctx cc = {m, t, pd_grad_loops_current(), bad};
    pd_parallel_for(np, grain, check_params_task, &cc);
    pd_status st = PD_OK;
    for (size_t i = 0; i < np && st == PD_OK; i++)
        if (bad[i]) st = first_nonfinite(m, t, i, e);
    free(bad);
    if (st != PD_OK) return st;
    pd_parallel_for(np, grain, commit_params_task, &cc);
    for (size_t i = 0; i < np; i++) m->params[i]->grad_zero = 0;
    return PD_OK;
}

/* A refused or dropped pass leaves its direct gradients as it found them: +0.0. */
static void restore_direct(const pd_model *m, const pd_grad_txn *t) {
    if (!t->direct) return;
    for (size_t i = 0; i < m->n_params; i++)
        if (t->direct[i]) pd_grad_zero(m->params[i]);
}

static void txn_free(pd_grad_txn *t) {
    free(t->grad);
    free(t->direct);
    free(t->settled);
    pd_buf_put(t->arena);
    memset(t, 0, sizeof *t);
}

static void txn_drop(const pd_model *m, pd_grad_txn *t) {
    restore_direct(m, t);
    txn_free(t);
}

/* Parameter i may take its contribution in place: no other slot of the table names the same
 * parameter (each slot's contribution needs its own buffer then), and its gradient is +0.0
 * unless the caller lets the pass write over it. */
static int direct_ok(const pd_model *m, size_t i, int direct) {
    if (m->shared[i]) return 0;
    return direct == PD_DIRECT_OVER || (direct == PD_DIRECT_ZEROS && m->params[i]->grad_zero);
}

pd_status pd_grad_txn_open(pd_grad_txn *t, const pd_model *m, int direct, pd_error *e) {
    const size_t np = m->n_params;
    memset(t, 0, sizeof *t);
    t->grad = calloc(np ? np : 1, sizeof(double *));
    t->direct = calloc(np ? np : 1, 1);
    t->settled = calloc(np ? np : 1, 1);
    if (!t->grad || !t->direct || !t->settled) return pd_fail(e, PD_ERR_ALLOC, np, 0.0, -1, -1);
    size_t total = 0;
    for (size_t i = 0; i < np; i++) {
        t->direct[i] = (uint8_t)direct_ok(m, i, direct);
        if (!t->direct[i]) total += m->params[i]->size;
    }
    t->arena = pd_buf_get(total, 0, e);
    if (!t->arena) return pd_fail(e, PD_ERR_ALLOC, total, 0.0, -1, -1);
    double *p = t->arena;
    for (size_t i = 0; i < np; i++) {
        t->grad[i] = t->direct[i] ? m->params[i]->grad : p;
        if (!t->direct[i]) p += m->params[i]->size;
    }
    return PD_OK;
}

void pd_graph_discard(pd_graph *g) {
    if (!g->pending) return;
    txn_drop(g->model, g->pending);
    free(g->pending);
    g->pending = NULL;
}

/* The finished contributions of an uncommitted pass move to the graph until commit or discard;
 * its direct gradients are no longer +0.0, so no other pass writes into them meanwhile. */
static pd_status keep_pending(pd_graph *g, pd_grad_txn *t, pd_error *e) {
    pd_grad_txn *kept = malloc(sizeof *kept);
    if (!kept) {
        txn_drop(g->model, t);
        return pd_fail(e, PD_ERR_ALLOC, sizeof *kept, 0.0, -1, -1);
    }
    *kept = *t;
    pd_graph_discard(g);
    for (size_t i = 0; i < g->model->n_params; i++)
        if (kept->direct[i]) g->model->params[i]->grad_zero = 0;
    g->pending = kept;
    return PD_OK;
}

pd_status pd_grad_txn_end(pd_graph *g, pd_grad_txn *t, pd_status st, pd_error *e) {
    if (st == PD_OK && !t->eager) return keep_pending(g, t, e);
    if (st == PD_OK) st = txn_commit(g->model, t, e);
    if (st != PD_OK) restore_direct(g->model, t);
    txn_free(t);
    return st;
}

pd_status pd_graph_current(const pd_graph *g, pd_error *e) {
    const pd_model *m = g->model;
    if (!g->has_loss) return pd_fail(e, PD_ERR_NO_LOSS, 0, 0.0, -1, -1);
    if (!g->recorded) return pd_fail(e, PD_ERR_NOT_RECORDED, 0, 0.0, -1, -1);
    for (size_t i = 0; i < m->n_params; i++)
        if (m->params[i]->revision != g->revisions[i]) return pd_fail(e, PD_ERR_STALE, i, 0.0, -1, -1);
    return PD_OK;
}

pd_status pd_graph_same_values(const pd_graph *g, pd_csum *gathered, pd_error *e) {
    const pd_model *m = g->model;
    size_t *now = malloc((m->n_params ? m->n_params : 1) * sizeof(size_t));
    if (!now) return pd_fail(e, PD_ERR_ALLOC, m->n_params, 0.0, -1, -1);
    if (gathered)
        for (size_t i = 0; i < m->n_params; i++) now[i] = pd_csum_result(&gathered[i], m->params[i]->size);
    else
        pd_params_checksums(m->params, m->n_params, now);
    for (size_t i = 0; i < m->n_params; i++) /* value 1.0: changed behind the revision counter */
        if (now[i] != g->checksums[i]) {
            free(now);
            return pd_fail(e, PD_ERR_STALE, i, 1.0, -1, -1);
        }
    free(now);
    return PD_OK;
}

pd_status pd_graph_fresh(const pd_graph *g, pd_error *e) {
    PD_TRY(pd_graph_current(g, e));
    return g->unguarded ? PD_OK : pd_graph_same_values(g, NULL, e);
}

pd_status pd_graph_commit(pd_graph *g, pd_error *e) {
    pd_grad_txn *t = g->pending;
    if (!t) return pd_fail(e, PD_ERR_NO_PENDING, 0, 0.0, -1, -1);
    pd_status st = pd_graph_fresh(g, e);
    if (st == PD_OK) st = txn_commit(g->model, t, e);
    if (st == PD_OK) memset(t->direct, 0, g->model->n_params); /* committed: nothing to write back */
    pd_graph_discard(g);
    return st;
}
