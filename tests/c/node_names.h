/* Trace names of the recorded values (the fixture format's names) against pd_node_kind:
 * the C-side twin of pydepth/_nodes.py, for the C test program only. */
#ifndef PD_TEST_NODE_NAMES_H
#define PD_TEST_NODE_NAMES_H
#include "pd_decoder.h"

static const char *const pd_test_block_kind_names[PD_N_BLOCK_KINDS] = {
    "attention_norm.mean_square", "attention_norm.inverse_rms", "attention_norm.normalized",
    "attention_norm.output", "attention.query_heads", "attention.key_heads",
    "attention.value_heads", "attention.rotated_query_heads", "attention.rotated_key_heads",
    "attention.weights", "attention.head_outputs", "attention.merged", "attention.output",
    "after_attention", "ffn_norm.output", "ffn.gate_linear", "ffn.gate_silu", "ffn.up",
    "ffn.product", "ffn.output", "output",
};

static const struct {
    const char *name;
    int kind;
} pd_test_global_kinds[] = {
    {"embedding.output", PD_N_EMBEDDING}, {"final_norm.output", PD_N_FINAL_NORM_OUTPUT},
    {"logits", PD_N_LOGITS}, {"loss", PD_N_LOSS},
};

#endif
