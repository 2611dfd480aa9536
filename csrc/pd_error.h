/* Status codes shared by every C function: return codes, never aborts. */
#ifndef PD_ERROR_H
#define PD_ERROR_H
#include <stddef.h>

typedef enum {
    PD_OK = 0,
    PD_ERR_ALLOC,              /* allocation failed */
    PD_ERR_OVERFLOW,           /* a size product or sum overflowed */
    PD_ERR_ZERO_FAN_IN,
    PD_ERR_ZERO_FAN_OUT,
    PD_ERR_FAN_SUM_OVERFLOW,
    PD_ERR_SHAPE_OVERFLOW,
    PD_ERR_CONFIG,             /* invalid configuration; detail in index */
    PD_ERR_NAME,               /* invalid parameter name; index = byte offset */
    PD_ERR_SHAPE,              /* a tensor shape does not match the layout */
    PD_ERR_TOKEN,              /* token id out of range; index = flat position */
    PD_ERR_TARGET,             /* target id out of range; index = flat position */
    PD_ERR_NONFINITE,          /* a NaN or infinity arose; node/index say where */
    PD_ERR_ROPE,               /* non-finite RoPE table entry */
    PD_ERR_ZERO_MEAN_SQUARE,   /* eps == 0 and a row has mean square 0 */
    PD_ERR_EMPTY,              /* no valid positions / targets */
    PD_ERR_LAYOUT,             /* segments, positions or validity inconsistent */
    PD_ERR_STALE,              /* a parameter changed after the graph was recorded; index = parameter */
    PD_ERR_NO_LOSS             /* backward needs a graph with a loss attached */
} pd_status;

/* Where an error arose: filled by the failing function, read by Python. */
typedef struct {
    pd_status code;
    size_t index;    /* flat element or position index, when meaningful */
    double value;    /* offending value, when meaningful */
    int block;       /* decoder block, -1 when global */
    int node;        /* pd_node_kind of the offending value, -1 when none */
} pd_error;

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
