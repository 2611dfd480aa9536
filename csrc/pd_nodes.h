/* SPDX-License-Identifier: MIT */
/* The one table of node kinds: the named values of a forward (per block, then global) and the
 * extra names error reports use. pydepth/_nodes.py reads it through pd_node_kind_info(). */
#ifndef PD_NODES_H
#define PD_NODES_H

/* Where a kind lives: one per block, once per graph, or only in reports / by kind. */
typedef enum { PD_SCOPE_BLOCK = 0, PD_SCOPE_GLOBAL, PD_SCOPE_EXTRA } pd_node_scope;

/* X(identifier, trace name, scope, lean, shape). Block kinds come first, in the trace's
 * evaluation order (docs/numerics.md §5.8); a kind's code is its position in this list. lean:
 * KEPT when a record made for a training step (PD_RECORD_TRAINING: what the reverse pass and the
 * health observer read) keeps the value, else SPARE. shape: its class in pd_shapes.h (NONE: a
 * name only reports use); a block record's buffers are carved by it. */
#define PD_NODE_KINDS(X)                                                      \
    X(ATTN_MEAN_SQUARE, "attention_norm.mean_square", BLOCK, KEPT, STAT)      \
    X(ATTN_INVERSE_RMS, "attention_norm.inverse_rms", BLOCK, KEPT, STAT)      \
    X(ATTN_NORMALIZED, "attention_norm.normalized", BLOCK, KEPT, ROWS_W)      \
    X(ATTN_NORM_OUTPUT, "attention_norm.output", BLOCK, KEPT, ROWS_W)         \
    X(QUERY_HEADS, "attention.query_heads", BLOCK, SPARE, HEADS)              \
    X(KEY_HEADS, "attention.key_heads", BLOCK, SPARE, KV_HEADS)               \
    X(VALUE_HEADS, "attention.value_heads", BLOCK, KEPT, KV_HEADS)            \
    X(ROT_QUERY_HEADS, "attention.rotated_query_heads", BLOCK, KEPT, HEADS)   \
    X(ROT_KEY_HEADS, "attention.rotated_key_heads", BLOCK, KEPT, KV_HEADS)    \
    X(WEIGHTS, "attention.weights", BLOCK, KEPT, SCORES)                      \
    X(HEAD_OUTPUTS, "attention.head_outputs", BLOCK, SPARE, HEADS)            \
    X(MERGED, "attention.merged", BLOCK, KEPT, ROWS_W)                        \
    X(ATTN_OUTPUT, "attention.output", BLOCK, KEPT, ROWS_W)                   \
    X(AFTER_ATTENTION, "after_attention", BLOCK, KEPT, ROWS_W)                \
    X(FFN_NORM_OUTPUT, "ffn_norm.output", BLOCK, KEPT, ROWS_W)                \
    X(GATE_LINEAR, "ffn.gate_linear", BLOCK, KEPT, ROWS_F)                    \
    X(GATE_SILU, "ffn.gate_silu", BLOCK, SPARE, ROWS_F)                       \
    X(UP, "ffn.up", BLOCK, KEPT, ROWS_F)                                      \
    X(PRODUCT, "ffn.product", BLOCK, SPARE, ROWS_F)                           \
    X(FFN_OUTPUT, "ffn.output", BLOCK, KEPT, ROWS_W)                          \
    X(BLOCK_OUTPUT, "output", BLOCK, KEPT, ROWS_W)                            \
    X(EMBEDDING, "embedding.output", GLOBAL, KEPT, ROWS_W)                    \
    X(FINAL_NORM_OUTPUT, "final_norm.output", GLOBAL, KEPT, ROWS_W)           \
    X(LOGITS, "logits", GLOBAL, SPARE, ROWS_V)                                \
    X(LOSS, "loss", GLOBAL, KEPT, SCALAR)                                     \
    X(PER_TARGET_NLL, "per_target_nll", EXTRA, KEPT, TOKENS)                  \
    X(ATTN_SCORES, "attention scores", EXTRA, SPARE, NONE)                    \
    X(FFN_NORM, "ffn_norm", EXTRA, SPARE, NONE)                               \
    X(FINAL_NORM, "final_norm", EXTRA, SPARE, NONE)                           \
    X(ADJOINT, "residual adjoint", EXTRA, SPARE, NONE)                        \
    X(GRADIENT, "parameter gradient", EXTRA, SPARE, NONE)

#define PD_NODE_ENUM_(id, name, scope, lean, shape) PD_N_##id,
typedef enum { PD_NODE_KINDS(PD_NODE_ENUM_) PD_N_COUNT } pd_node_kind;
#undef PD_NODE_ENUM_

#define PD_NODE_COUNT_BLOCK_(id, name, scope, lean, shape) +(PD_SCOPE_##scope == PD_SCOPE_BLOCK)
enum { PD_N_BLOCK_KINDS = 0 PD_NODE_KINDS(PD_NODE_COUNT_BLOCK_) };
#undef PD_NODE_COUNT_BLOCK_

/* Identifier ("LOGITS"), trace name and scope ("block", "global", "extra") of a kind;
 * returns 0 (nothing written) outside [0, PD_N_COUNT). */
int pd_node_kind_info(int kind, const char **ident, const char **name, const char **scope);
/* 1 when a lean record (PD_RECORD_TRAINING) keeps values of this kind, else 0. */
int pd_node_kept_lean(int kind);
/* The shape class (pd_shapes.h) of a kind's values; PD_S_NONE outside [0, PD_N_COUNT). */
int pd_node_shape(int kind);

#endif
