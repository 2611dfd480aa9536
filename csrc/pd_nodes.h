/* SPDX-License-Identifier: MIT */
/* The one table of node kinds: the named values of a forward (per block, then global) and the
 * extra names error reports use. pydepth/_nodes.py reads it through pd_node_kind_info(). */
#ifndef PD_NODES_H
#define PD_NODES_H

/* Where a kind lives: one per block, once per graph, or only in reports / by kind. */
typedef enum { PD_SCOPE_BLOCK = 0, PD_SCOPE_GLOBAL, PD_SCOPE_EXTRA } pd_node_scope;

/* X(identifier, trace name, scope). Block kinds come first, in the trace's evaluation order
 * (docs/numerics.md §5.8); a kind's code is its position in this list. */
#define PD_NODE_KINDS(X)                                                  \
    X(ATTN_MEAN_SQUARE, "attention_norm.mean_square", BLOCK)              \
    X(ATTN_INVERSE_RMS, "attention_norm.inverse_rms", BLOCK)              \
    X(ATTN_NORMALIZED, "attention_norm.normalized", BLOCK)                \
    X(ATTN_NORM_OUTPUT, "attention_norm.output", BLOCK)                   \
    X(QUERY_HEADS, "attention.query_heads", BLOCK)                        \
    X(KEY_HEADS, "attention.key_heads", BLOCK)                            \
    X(VALUE_HEADS, "attention.value_heads", BLOCK)                        \
    X(ROT_QUERY_HEADS, "attention.rotated_query_heads", BLOCK)            \
    X(ROT_KEY_HEADS, "attention.rotated_key_heads", BLOCK)                \
    X(WEIGHTS, "attention.weights", BLOCK)                                \
    X(HEAD_OUTPUTS, "attention.head_outputs", BLOCK)                      \
    X(MERGED, "attention.merged", BLOCK)                                  \
    X(ATTN_OUTPUT, "attention.output", BLOCK)                             \
    X(AFTER_ATTENTION, "after_attention", BLOCK)                          \
    X(FFN_NORM_OUTPUT, "ffn_norm.output", BLOCK)                          \
    X(GATE_LINEAR, "ffn.gate_linear", BLOCK)                              \
    X(GATE_SILU, "ffn.gate_silu", BLOCK)                                  \
    X(UP, "ffn.up", BLOCK)                                                \
    X(PRODUCT, "ffn.product", BLOCK)                                      \
    X(FFN_OUTPUT, "ffn.output", BLOCK)                                    \
    X(BLOCK_OUTPUT, "output", BLOCK)                                      \
    X(EMBEDDING, "embedding.output", GLOBAL)                              \
    X(FINAL_NORM_OUTPUT, "final_norm.output", GLOBAL)                     \
    X(LOGITS, "logits", GLOBAL)                                           \
    X(LOSS, "loss", GLOBAL)                                               \
    X(PER_TARGET_NLL, "per_target_nll", EXTRA)                            \
    X(ATTN_SCORES, "attention scores", EXTRA)                             \
    X(FFN_NORM, "ffn_norm", EXTRA)                                        \
    X(FINAL_NORM, "final_norm", EXTRA)                                    \
    X(ADJOINT, "residual adjoint", EXTRA)                                 \
    X(GRADIENT, "parameter gradient", EXTRA)

#define PD_NODE_ENUM_(id, name, scope) PD_N_##id,
typedef enum { PD_NODE_KINDS(PD_NODE_ENUM_) PD_N_COUNT } pd_node_kind;
#undef PD_NODE_ENUM_

#define PD_NODE_COUNT_BLOCK_(id, name, scope) +(PD_SCOPE_##scope == PD_SCOPE_BLOCK)
enum { PD_N_BLOCK_KINDS = 0 PD_NODE_KINDS(PD_NODE_COUNT_BLOCK_) };
#undef PD_NODE_COUNT_BLOCK_

/* Identifier ("LOGITS"), trace name and scope ("block", "global", "extra") of a kind;
 * returns 0 (nothing written) outside [0, PD_N_COUNT). */
int pd_node_kind_info(int kind, const char **ident, const char **name, const char **scope);

#endif
