/* SPDX-License-Identifier: MIT */
/* The parameter layout as tables (docs/numerics.md §3.1), X(slot, name, shape class): the tensors
 * before the blocks, each block's, and those after them. A tensor's index is its position in
 * declaration order: the leading rows, block 0's rows, ..., block L-1's, the trailing rows.
 * pd_model.c reads the tables for names, shapes, counts and draws; Python reads them through
 * pd_param_name and pd_param_shape (DecoderConfig.parameter_layout). */
#ifndef PD_PARAMS_H
#define PD_PARAMS_H
#include <stddef.h>

#define PD_LEADING_PARAMS(X) X(EMBEDDING, "token_embedding.weight", V_BY_W)

#define PD_BLOCK_PARAMS(X)                                \
    X(ATTN_GAIN, "attention_norm.gain", GAIN)             \
    X(WQ, "attention.query.weight", W_BY_W)               \
    X(WK, "attention.key.weight", W_BY_KD)                \
    X(WV, "attention.value.weight", W_BY_KD)              \
    X(WO, "attention.output.weight", W_BY_W)              \
    X(FFN_GAIN, "ffn_norm.gain", GAIN)                    \
    X(WG, "ffn.gate.weight", W_BY_F)                      \
    X(WU, "ffn.up.weight", W_BY_F)                        \
    X(WD, "ffn.down.weight", F_BY_W)

#define PD_TRAILING_PARAMS(X) X(FINAL_GAIN, "final_norm.gain", GAIN)

/* Slots: a leading tensor's slot is its index, a block tensor's its place in the block, a
 * trailing tensor's its place after the blocks. */
#define PD_LEAD_ENUM_(slot, name, shape) PD_LEAD_##slot,
#define PD_BLOCK_ENUM_(slot, name, shape) PD_P_##slot,
#define PD_TAIL_ENUM_(slot, name, shape) PD_TAIL_##slot,
enum { PD_LEADING_PARAMS(PD_LEAD_ENUM_) PD_P_LEADING };
enum { PD_BLOCK_PARAMS(PD_BLOCK_ENUM_) PD_P_PER_BLOCK };
enum { PD_TRAILING_PARAMS(PD_TAIL_ENUM_) PD_P_TRAILING };
#undef PD_LEAD_ENUM_
#undef PD_BLOCK_ENUM_
#undef PD_TAIL_ENUM_

/* Index of block b's tensor in slot k. */
static inline size_t pd_block_param(size_t b, int k) { return PD_P_LEADING + PD_P_PER_BLOCK * b + (size_t)k; }
/* Index of the trailing tensor in slot k of a model with `layers` blocks. */
static inline size_t pd_trailing_param(size_t layers, int k) { return pd_block_param(layers, k); }

#endif
