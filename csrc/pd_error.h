/* SPDX-License-Identifier: MIT */
/* Status codes shared by every C function: return codes, never aborts. */
#ifndef PD_ERROR_H
#define PD_ERROR_H
#include <stddef.h>

/* The one table of status codes: X(identifier, meaning). Codes are positions in this list;
 * pydepth/_translate.py reads identifiers and codes through pd_status_name(). */
#define PD_STATUS_CODES(X)                                                                 \
    X(OK, "success")                                                                       \
    X(ERR_ALLOC, "allocation failed")                                                      \
    X(ERR_OVERFLOW, "a size product or sum overflowed")                                    \
    X(ERR_ZERO_FAN_IN, "Xavier fan_in is 0")                                               \
    X(ERR_ZERO_FAN_OUT, "Xavier fan_out is 0")                                             \
    X(ERR_FAN_SUM_OVERFLOW, "Xavier fan_in + fan_out overflowed")                          \
    X(ERR_SHAPE_OVERFLOW, "an element count overflowed")                                   \
    X(ERR_CONFIG, "invalid configuration; index names the check")                          \
    X(ERR_NAME, "invalid parameter name; index = byte offset")                             \
    X(ERR_SHAPE, "a tensor shape does not match the layout")                               \
    X(ERR_TOKEN, "token id out of range; index = flat position")                           \
    X(ERR_TARGET, "target id out of range; index = flat position")                         \
    X(ERR_NONFINITE, "a NaN or infinity arose; node/index say where")                      \
    X(ERR_ROPE, "non-finite RoPE table entry")                                             \
    X(ERR_ZERO_MEAN_SQUARE, "eps == 0 and a row has mean square 0")                        \
    X(ERR_EMPTY, "no valid positions / targets")                                           \
    X(ERR_LAYOUT, "segments, positions or validity inconsistent")                          \
    X(ERR_STALE, "a parameter changed after the graph was recorded; index = parameter")    \
    X(ERR_NO_LOSS, "backward needs a graph with a loss attached")                          \
    X(ERR_NOT_RECORDED, "backward needs a graph recorded with record != 0")                \
    X(ERR_INTERRUPTED, "the interrupt check asked to stop; block says where")             \
    X(ERR_LOSS_ATTACHED, "a loss is already attached to this graph (or being attached)")  \
    X(ERR_NO_PENDING, "commit needs a reverse pass run without committing")                \
    X(ERR_RECORD_MODE, "unknown record mode; value = the mode given")

#define PD_STATUS_ENUM_(id, meaning) PD_##id,
typedef enum { PD_STATUS_CODES(PD_STATUS_ENUM_) PD_STATUS_COUNT } pd_status;
#undef PD_STATUS_ENUM_

/* "ERR_TOKEN" for PD_ERR_TOKEN; NULL outside [0, PD_STATUS_COUNT). */
const char *pd_status_name(int code);

/* Where an error arose: filled by the failing function, read by Python. */
typedef struct {
    pd_status code;
    size_t index;    /* flat element or position index, when meaningful */
    double value;    /* offending value, when meaningful */
    int block;       /* decoder block, -1 when global */
    int node;        /* pd_node_kind of the offending value, -1 when none */
} pd_error;

/* Returns the status of call from the enclosing function unless it is PD_OK. */
#define PD_TRY(call)                                                                       \
    do {                                                                                   \
        pd_status pd_try_ = (call);                                                        \
        if (pd_try_ != PD_OK) return pd_try_;                                              \
    } while (0)

static inline pd_status pd_fail(pd_error *e, pd_status code, size_t index, double value,
                                int block, int node) {
    if (e) {
        e->code = code;
        e->index = index;
        e->value = value;
        e->block = block;
        e->node = node;
    }
    return code;
}

#endif
