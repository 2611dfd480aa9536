/* SPDX-License-Identifier: MIT */
/* Configuration checks, the parameter layout read from its tables, the draws of initialization
 * and the model a forward runs. */
#include <math.h>
#include <stdio.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include "pd_model.h"
#include "pd_init.h"
#include "pd_tensor.h"
#include "ops/rope.h"

#define CONFIG_RULE_(index, rule) [index] = rule,
static const char *const config_rules[] = {PD_CONFIG_CHECKS(CONFIG_RULE_)};
#undef CONFIG_RULE_

const char *pd_config_check_rule(size_t index) {
    return index < sizeof config_rules / sizeof config_rules[0] ? config_rules[index] : NULL;
}

pd_status pd_config_validate(const pd_config *c, pd_error *e) {
    /* Checks in the reference's order; index names the failed check. */
    if (c->vocabulary_size == 0) return pd_fail(e, PD_ERR_CONFIG, 1, 0.0, -1, -1);
    if (c->model_width == 0) return pd_fail(e, PD_ERR_CONFIG, 2, 0.0, -1, -1);
    if (c->heads == 0) return pd_fail(e, PD_ERR_CONFIG, 3, 0.0, -1, -1);
    if (c->model_width % c->heads) return pd_fail(e, PD_ERR_CONFIG, 4, 0.0, -1, -1);
    if ((c->model_width / c->heads) % 2) return pd_fail(e, PD_ERR_CONFIG, 5, 0.0, -1, -1);
    if (c->kv_heads == 0 || c->heads % c->kv_heads) return pd_fail(e, PD_ERR_CONFIG, 10, 0.0, -1, -1);
    if (c->feed_forward_width == 0) return pd_fail(e, PD_ERR_CONFIG, 6, 0.0, -1, -1);
    if (c->max_positions == 0) return pd_fail(e, PD_ERR_CONFIG, 7, 0.0, -1, -1);
    if (!isfinite(c->rope_base) || c->rope_base <= 0.0) return pd_fail(e, PD_ERR_CONFIG, 8, c->rope_base, -1, -1);
    if (!isfinite(c->rms_epsilon) || c->rms_epsilon < 0.0) return pd_fail(e, PD_ERR_CONFIG, 9, c->rms_epsilon, -1, -1);
    return PD_OK;
}

void pd_config_extents(const pd_config *c, size_t B, size_t T, size_t x[PD_X_COUNT]) {
    const size_t D = c->heads ? c->model_width / c->heads : 0; /* checked by pd_config_validate */
    x[PD_X_ONE] = 1;
    x[PD_X_B] = B;
    x[PD_X_T] = T;
    x[PD_X_H] = c->heads;
    x[PD_X_K] = c->kv_heads;
    x[PD_X_D] = D;
    x[PD_X_W] = c->model_width;
    x[PD_X_KD] = c->kv_heads * D;
    x[PD_X_F] = c->feed_forward_width;
    x[PD_X_V] = c->vocabulary_size;
}

typedef struct {
    const char *name;
    int shape;
} param_row;

#define PARAM_ROW_(slot, name, shape) {name, PD_S_##shape},
static const param_row leading_rows[] = {PD_LEADING_PARAMS(PARAM_ROW_)};
static const param_row block_rows[] = {PD_BLOCK_PARAMS(PARAM_ROW_)};
static const param_row trailing_rows[] = {PD_TRAILING_PARAMS(PARAM_ROW_)};
#undef PARAM_ROW_

size_t pd_param_tensor_count(const pd_config *c) {
    return PD_P_LEADING + PD_P_PER_BLOCK * c->layers + PD_P_TRAILING;
}

/* The table row of parameter i and its block (SIZE_MAX outside the blocks); NULL past the end. */
static const param_row *row_of(const pd_config *c, size_t i, size_t *block) {
    const size_t trailing = pd_trailing_param(c->layers, 0);
    *block = SIZE_MAX;
    if (i >= pd_param_tensor_count(c)) return NULL;
    if (i < PD_P_LEADING) return &leading_rows[i];
    if (i >= trailing) return &trailing_rows[i - trailing];
    *block = (i - PD_P_LEADING) / PD_P_PER_BLOCK;
    return &block_rows[(i - PD_P_LEADING) % PD_P_PER_BLOCK];
}

pd_status pd_param_shape(const pd_config *c, size_t i, size_t *rank, size_t dims[2]) {
    size_t block, x[PD_X_COUNT], d[4];
    const param_row *row = row_of(c, i, &block);
    if (!row) return PD_ERR_SHAPE;
    pd_config_extents(c, 0, 0, x);
    *rank = pd_shape_dims(row->shape, x, d);
    dims[0] = d[0];
    dims[1] = d[1];
    return PD_OK;
}

size_t pd_param_name(const pd_config *c, size_t i, char *buf, size_t cap) {
    size_t block;
    const param_row *row = row_of(c, i, &block);
    int len = 0;
    if (!row) len = snprintf(buf, cap, "%s", "");
    else if (block == SIZE_MAX) len = snprintf(buf, cap, "%s", row->name);
    else len = snprintf(buf, cap, "blocks.%zu.%s", block, row->name);
    return len < 0 ? 0 : (size_t)len;
}

/* *total += the elements of the n rows (their index is `first` + row), checked. */
static pd_status add_rows(const param_row *rows, size_t n, const size_t x[PD_X_COUNT], size_t first,
                          size_t *total, pd_error *e) {
    size_t sz;
    for (size_t k = 0; k < n; k++)
        if (!pd_shape_size(rows[k].shape, x, &sz) || !pd_add_ok(*total, sz, total))
            return pd_fail(e, PD_ERR_OVERFLOW, first + k, 0.0, -1, -1);
    return PD_OK;
}

pd_status pd_config_parameter_count(const pd_config *c, size_t *count, pd_error *e) {
    size_t x[PD_X_COUNT], per_block = 0, total = 0;
    if (c->layers > (SIZE_MAX - PD_P_LEADING - PD_P_TRAILING) / PD_P_PER_BLOCK)
        return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    pd_config_extents(c, 0, 0, x);
    /* one block's count times the layer count, so huge depths stay O(1) */
    if (c->layers) PD_TRY(add_rows(block_rows, PD_P_PER_BLOCK, x, pd_block_param(0, 0), &per_block, e));
    if (!pd_mul_ok(per_block, c->layers, &total)) return pd_fail(e, PD_ERR_OVERFLOW, 0, 0.0, -1, -1);
    PD_TRY(add_rows(leading_rows, PD_P_LEADING, x, 0, &total, e));
    PD_TRY(add_rows(trailing_rows, PD_P_TRAILING, x, 0, &total, e));
    *count = total;
    return PD_OK;
}

pd_status pd_draw_parameters(const pd_config *c, double **values, pd_rng *rng, pd_error *e) {
    pd_rng trial = *rng;
    const size_t n = pd_param_tensor_count(c);
    for (size_t i = 0; i < n; i++) {
        size_t rank, dims[2];
        pd_param_shape(c, i, &rank, dims);
        if (rank == 1) { /* gains start at 1.0 and consume no draws */
            for (size_t w = 0; w < dims[0]; w++) values[i][w] = 1.0;
            continue;
        }
        pd_xavier_scale s;
        pd_status st = pd_xavier_scale_of(dims[0], dims[1], &s, e);
        if (st == PD_OK) st = pd_xavier_fill(&s, &trial, values[i], e);
        if (st != PD_OK) {
            if (e) e->index = i;
            return st;
        }
    }
    *rng = trial;
    return PD_OK;
}

pd_status pd_params_check(const pd_config *c, pd_param *const *params, size_t n, pd_error *e) {
    const size_t want = pd_param_tensor_count(c);
    if (n != want) return pd_fail(e, PD_ERR_SHAPE, n, (double)want, -1, -1);
    for (size_t i = 0; i < n; i++) {
        size_t rank, dims[2];
        pd_param_shape(c, i, &rank, dims);
        if (!params[i] || params[i]->size != dims[0] * (rank == 2 ? dims[1] : 1))
            return pd_fail(e, PD_ERR_SHAPE, i, 0.0, -1, -1);
    }
    return PD_OK;
}

static int by_address(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t)*(pd_param *const *)a, y = (uintptr_t)*(pd_param *const *)b;
    return (x > y) - (x < y);
}

/* shared[i] = 1 when another slot of the table names params[i] too (by a sorted copy). */
static pd_status mark_shared(pd_model *m, pd_error *e) {
    const size_t n = m->n_params;
    pd_param **sorted = malloc((n ? n : 1) * sizeof *sorted);
    m->shared = calloc(n ? n : 1, 1);
    if (!sorted || !m->shared) {
        free(sorted);
        return pd_fail(e, PD_ERR_ALLOC, n, 0.0, -1, -1);
    }
    if (n) memcpy(sorted, m->params, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_address);
    for (size_t i = 0; i < n; i++) {
        size_t lo = 0, hi = n; /* the first sorted entry not below params[i] */
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if ((uintptr_t)sorted[mid] < (uintptr_t)m->params[i]) lo = mid + 1;
            else hi = mid;
        }
        m->shared[i] = (uint8_t)(lo + 1 < n && sorted[lo + 1] == m->params[i]);
    }
    free(sorted);
    return PD_OK;
}

pd_status pd_model_init(pd_model *m, const pd_config *c, pd_param **params, pd_error *e) {
    memset(m, 0, sizeof *m);
    pd_status st = pd_config_validate(c, e);
    if (st != PD_OK) return st;
    m->cfg = *c;
    m->head_width = c->model_width / c->heads;
    m->kv_width = c->kv_heads * m->head_width;
    m->n_params = pd_param_tensor_count(c);
    m->params = params;
    if ((st = mark_shared(m, e)) != PD_OK) {
        pd_model_free(m);
        return st;
    }
    size_t half = m->head_width / 2, tab;
    if (!pd_mul_ok(c->max_positions, half, &tab)) {
        pd_model_free(m);
        return pd_fail(e, PD_ERR_ROPE, 0, 0.0, -1, -1);
    }
    m->rope_sin = pd_zeros(tab, e);
    m->rope_cos = pd_zeros(tab, e);
    if (!m->rope_sin || !m->rope_cos) {
        pd_model_free(m);
        return pd_fail(e, PD_ERR_ALLOC, 2 * tab, 0.0, -1, -1);
    }
    st = pd_rope_tables(c->max_positions, m->head_width, c->rope_base, m->rope_sin, m->rope_cos, e);
    if (st != PD_OK) pd_model_free(m);
    return st;
}

void pd_model_free(pd_model *m) {
    free(m->rope_sin);
    free(m->rope_cos);
    free(m->shared);
    free(m->branch);
    m->rope_sin = m->rope_cos = NULL;
    m->shared = NULL;
    m->branch = NULL;
}

pd_status pd_model_set_branch(pd_model *m, const double *mu, pd_error *e) {
    const size_t L = m->cfg.layers;
    int any = 0;
    for (size_t b = 0; b < L; b++) {
        /* the negated test also refuses NaN */
        if (!(mu[b] > 0.0 && mu[b] <= DBL_MAX)) return pd_fail(e, PD_ERR_NONFINITE, b, mu[b], (int)b, -1);
        any |= mu[b] != 1.0;
    }
    double *copy = NULL;
    if (any) {
        copy = malloc(L * sizeof(double));
        if (!copy) return pd_fail(e, PD_ERR_ALLOC, L, 0.0, -1, -1);
        memcpy(copy, mu, L * sizeof(double));
    }
    free(m->branch);
    m->branch = copy;
    return PD_OK;
}
