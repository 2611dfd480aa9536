"""Names of the values a forward records, mirroring pd_node_kind in csrc/pd_decoder.h."""
from __future__ import annotations

from typing import Dict, Tuple

# Per-block kinds, in the reference trace's evaluation order (kind = index).
BLOCK_KINDS: Tuple[str, ...] = (
    "attention_norm.mean_square", "attention_norm.inverse_rms", "attention_norm.normalized",
    "attention_norm.output", "attention.query_heads", "attention.key_heads",
    "attention.value_heads", "attention.rotated_query_heads", "attention.rotated_key_heads",
    "attention.weights", "attention.head_outputs", "attention.merged", "attention.output",
    "after_attention", "ffn_norm.output", "ffn.gate_linear", "ffn.gate_silu", "ffn.up",
    "ffn.product", "ffn.output", "output",
)
BLOCK_KIND: Dict[str, int] = {name: i for i, name in enumerate(BLOCK_KINDS)}

EMBEDDING, FINAL_NORM_OUTPUT, LOGITS, LOSS = 32, 33, 34, 35
PER_TARGET_NLL = 41
GLOBAL_KINDS: Dict[int, str] = {
    EMBEDDING: "embedding.output", FINAL_NORM_OUTPUT: "final_norm.output", LOGITS: "logits",
    LOSS: "loss", 36: "attention scores", 37: "ffn_norm", 38: "final_norm",
    39: "residual adjoint", 40: "parameter gradient", PER_TARGET_NLL: "per_target_nll",
}
AFTER_ATTENTION = BLOCK_KIND["after_attention"]
BLOCK_OUTPUT = BLOCK_KIND["output"]
ATTENTION_OUTPUT = BLOCK_KIND["attention.output"]
FFN_OUTPUT = BLOCK_KIND["ffn.output"]


def node_name(block: int, kind: int) -> str:
    """The trace name of a (block, kind) value, e.g. 'blocks.1.ffn.up'."""
    if block < 0:
        return GLOBAL_KINDS.get(kind, f"value {kind}")
    if 0 <= kind < len(BLOCK_KINDS):
        return f"blocks.{block}.{BLOCK_KINDS[kind]}"
    return f"blocks.{block}.{GLOBAL_KINDS.get(kind, f'value {kind}')}"


def parse_name(name: str) -> Tuple[int, int]:
    """(block, kind) of a trace name; KeyError when it names no recorded value."""
    for kind, text in GLOBAL_KINDS.items():
        if kind <= LOSS and name == text:
            return -1, kind
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blocks" and parts[1].isdigit() and parts[2] in BLOCK_KIND:
        return int(parts[1]), BLOCK_KIND[parts[2]]
    raise KeyError(f"no recorded value is named {name!r}")
