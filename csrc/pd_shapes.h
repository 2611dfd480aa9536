/* SPDX-License-Identifier: MIT */
/* The shapes of the core's tensors as one table: each named value (pd_nodes.h) and each
 * parameter (pd_params.h) has a shape class, a row of extents; a buffer's size is the product
 * of its shape, so the two cannot disagree. */
#ifndef PD_SHAPES_H
#define PD_SHAPES_H
#include <stddef.h>

/* The extents a shape is made of: a graph's batch B and sequence T, the heads H and key/value
 * heads K, the head width D, the model width W, the key/value width KD = K * D, the
 * feed-forward width F and the vocabulary V (docs/numerics.md §1). */
typedef enum {
    PD_X_ONE = 0, PD_X_B, PD_X_T, PD_X_H, PD_X_K, PD_X_D, PD_X_W, PD_X_KD, PD_X_F, PD_X_V, PD_X_COUNT
} pd_extent;

/* X(class, rank, dim 0, dim 1, dim 2, dim 3); the dims past the rank are ONE. */
#define PD_SHAPES(X)                           \
    X(NONE, 0, ONE, ONE, ONE, ONE)    /* no value: a name reports use */ \
    X(SCALAR, 0, ONE, ONE, ONE, ONE)           \
    X(TOKENS, 2, B, T, ONE, ONE)               \
    X(STAT, 3, B, T, ONE, ONE)                 \
    X(ROWS_W, 3, B, T, W, ONE)                 \
    X(ROWS_KD, 3, B, T, KD, ONE)               \
    X(ROWS_F, 3, B, T, F, ONE)                 \
    X(ROWS_V, 3, B, T, V, ONE)                 \
    X(HEADS, 4, B, H, T, D)                    \
    X(KV_HEADS, 4, B, K, T, D)                 \
    X(SCORES, 4, B, H, T, T)                   \
    X(GAIN, 1, W, ONE, ONE, ONE)               \
    X(V_BY_W, 2, V, W, ONE, ONE)               \
    X(W_BY_W, 2, W, W, ONE, ONE)               \
    X(W_BY_KD, 2, W, KD, ONE, ONE)             \
    X(W_BY_F, 2, W, F, ONE, ONE)               \
    X(F_BY_W, 2, F, W, ONE, ONE)

#define PD_SHAPE_ENUM_(cls, rank, d0, d1, d2, d3) PD_S_##cls,
typedef enum { PD_SHAPES(PD_SHAPE_ENUM_) PD_S_COUNT } pd_shape_class;
#undef PD_SHAPE_ENUM_

/* Rank of shape class cls (outside [0, PD_S_COUNT): NONE's), its dims over extents x in dims. */
size_t pd_shape_dims(int cls, const size_t x[PD_X_COUNT], size_t dims[4]);
/* *n = the elements of shape class cls over extents x; 0 when the product overflows. */
int pd_shape_size(int cls, const size_t x[PD_X_COUNT], size_t *n);

/* A cursor over a buffer of doubles: each carve hands out the next piece. Over a NULL base it
 * hands out NULLs and only counts (checked), so one binding function both sizes a buffer and
 * cuts it, and the two cannot disagree. Initialize it as {base, 0, 0}: the rest is its cache. */
typedef struct {
    double *base;
    size_t used;  /* doubles handed out so far */
    int overflow; /* a size or the sum overflowed */
    const size_t *x;              /* the extents the size table below was worked out over */
    size_t size[PD_S_COUNT];      /* each shape class's elements over x */
    unsigned char fits[PD_S_COUNT]; /* 0: that size overflowed */
} pd_carver;

/* The next piece, `count` values of shape class cls over x; x's values must not change between
 * the carves of one carver (a binding carves dozens of values over one extents array). */
double *pd_carve(pd_carver *c, size_t count, int cls, const size_t x[PD_X_COUNT]);

#endif
