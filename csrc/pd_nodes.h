/* SPDX-License-Identifier: MIT */
/* The one table of node kinds: the named values of a forward (per block, then global) and the
 * extra names error reports use. pydepth/_nodes.py reads it through pd_node_kind_info(). */
#ifndef PD_NODES_H
#define PD_NODES_H

/* Where a kind lives: one per block, once per graph, or only in reports / by kind. */
typedef enum { PD_SCOPE_BLOCK = 0, PD_SCOPE_GLOBAL, PD_SCOPE_EXTRA } pd_node_scope;

/* X(identifier, trace name, scope, lean). Block kinds come first, in the trace's evaluation
 * order (docs/numerics.md §5.8); a kind's code is its position in this list. lean: KEPT when a
 * record made for a training step (PD_RECORD_TRAINING: what the reverse pass and the health
 * observer read) keeps the value, else SPARE. */
#define PD_NODE_KINDS(X)                                                \
    X(ATTN_MEAN_SQUARE, "attention_norm.mean_square", BLOCK, KEPT)      \
    X(ATTN_INVERSE_RMS, "attention_norm.inverse_rms", BLOCK, KEPT)      \
    X(ATTN_NORMALIZED, "attention_norm.normalized", BLOCK, KEPT)        \
    X(ATTN_NORM_OUTPUT, "attention_norm.output", BLOCK, KEPT)           \
    X(QUERY_HEADS, "attention.query_heads", BLOCK, SPARE)               \
    X(KEY_HEADS, "attention.key_heads", BLOCK, SPARE)                   \
    X(VALUE_HEADS, "attention.value_heads", BLOCK, KEPT)                \
    X(ROT_QUERY_HEADS, "attention.rotated_query_heads", BLOCK, KEPT)    \
    X(ROT_KEY_HEADS, "attention.rotated_key_heads", BLOCK, KEPT)        \
    X(WEIGHTS, "attention.weights", BLOCK, KEPT)                        \
    X(HEAD_OUTPUTS, "attention.head_outputs", BLOCK, SPARE)             \
    X(MERGED, "attention.merged", BLOCK, KEPT)                          \
    X(ATTN_OUTPUT, "attention.output", BLOCK, KEPT)                     \
    X(AFTER_ATTENTION, "after_attention", BLOCK, KEPT)                  \
    X(FFN_NORM_OUTPUT, "ffn_norm.output", BLOCK, KEPT)                  \
    X(GATE_LINEAR, "ffn.gate_linear", BLOCK, KEPT)                      \
    X(GATE_SILU, "ffn.gate_silu", BLOCK, SPARE)                         \
    X(UP, "ffn.up", BLOCK, KEPT)                                        \
    X(PRODUCT, "ffn.product", BLOCK, SPARE)                             \
    X(FFN_OUTPUT, "ffn.output", BLOCK, KEPT)                            \
    X(BLOCK_OUTPUT, "output", BLOCK, KEPT)                              \
    X(EMBEDDING, "embedding.output", GLOBAL, KEPT)                      \
    X(FINAL_NORM_OUTPUT, "final_norm.output", GLOBAL, KEPT)             \
    X(LOGITS, "logits", GLOBAL, SPARE)                                  \
    X(LOSS, "loss", GLOBAL, KEPT)                                       \
    X(PER_TARGET_NLL, "per_target_nll", EXTRA, KEPT)                    \
    X(ATTN_SCORES, "attention scores", EXTRA, SPARE)                    \
    X(FFN_NORM, "ffn_norm", EXTRA, SPARE)                               \
    X(FINAL_NORM, "final_norm", EXTRA, SPARE)                           \
    X(ADJOINT, "residual adjoint", EXTRA, SPARE)                        \
    X(GRADIENT, "parameter gradient", EXTRA, SPARE)

#define PD_NODE_ENUM_(id, name, scope, lean) PD_N_##id,
typedef enum { PD_NODE_KINDS(PD_NODE_ENUM_) PD_N_COUNT } pd_node_kind;
#undef PD_NODE_ENUM_

#define PD_NODE_COUNT_BLOCK_(id, name, scope, lean) +(PD_SCOPE_##scope == PD_SCOPE_BLOCK)
enum { PD_N_BLOCK_KINDS = 0 PD_NODE_KINDS(PD_NODE_COUNT_BLOCK_) };
#undef PD_NODE_COUNT_BLOCK_

/* Identifier ("LOGITS"), trace name and scope ("block", "global", "extra") of a kind;
 * returns 0 (nothing written) outside [0, PD_N_COUNT). */
int pd_node_kind_info(int kind, const char **ident, const char **name, const char **scope);
/* 1 when a lean record (PD_RECORD_TRAINING) keeps values of this kind, else 0. */
int pd_node_kept_lean(int kind);

#endif
