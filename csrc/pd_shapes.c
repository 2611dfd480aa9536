/* SPDX-License-Identifier: MIT */
/* The shape-class table behind pd_shapes.h and the carving cursor. */
#include "pd_shapes.h"
#include "pd_tensor.h"

typedef struct {
    size_t rank;
    pd_extent dim[4];
} shape_row;

#define SHAPE_ROW_(cls, rank, d0, d1, d2, d3) {rank, {PD_X_##d0, PD_X_##d1, PD_X_##d2, PD_X_##d3}},
static const shape_row shapes[] = {PD_SHAPES(SHAPE_ROW_)};
#undef SHAPE_ROW_
_Static_assert(sizeof shapes / sizeof shapes[0] == PD_S_COUNT, "one row per shape class");

static const shape_row *row_of(int cls) { return &shapes[cls >= 0 && cls < PD_S_COUNT ? cls : PD_S_NONE]; }

size_t pd_shape_dims(int cls, const size_t x[PD_X_COUNT], size_t dims[4]) {
    const shape_row *s = row_of(cls);
    for (int i = 0; i < 4; i++) dims[i] = x[s->dim[i]];
    return s->rank;
}

int pd_shape_size(int cls, const size_t x[PD_X_COUNT], size_t *n) {
    const shape_row *s = row_of(cls);
    *n = 1;
    for (int i = 0; i < 4; i++)
        if (!pd_mul_ok(*n, x[s->dim[i]], n)) return 0;
    return 1;
}

/* Every class's size over x at once: a binding's carves repeat a handful of classes. */
static void size_table(pd_carver *c, const size_t x[PD_X_COUNT]) {
    for (int cls = 0; cls < PD_S_COUNT; cls++) c->fits[cls] = (unsigned char)pd_shape_size(cls, x, &c->size[cls]);
    c->x = x;
}

double *pd_carve(pd_carver *c, size_t count, int cls, const size_t x[PD_X_COUNT]) {
    size_t n;
    double *out = c->base ? c->base + c->used : NULL;
    if (c->x != x) size_table(c, x);
    const int s = cls >= 0 && cls < PD_S_COUNT ? cls : PD_S_NONE;
    if (!c->fits[s] || !pd_mul_ok(count, c->size[s], &n) || !pd_add_ok(c->used, n, &c->used))
        c->overflow = 1;
    return out;
}
