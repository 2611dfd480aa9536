# SPDX-License-Identifier: MIT
"""Names of the values a forward records, read from the C node-kind table (csrc/pd_nodes.h)."""
from __future__ import annotations

from typing import Dict, Tuple

from ._layout import NODE_KINDS

#: Identifier (as in C, without ``PD_N_``) -> kind code.
KIND: Dict[str, int] = {ident: kind for kind, (ident, _, _) in enumerate(NODE_KINDS)}

# Per-block kinds, in the reference trace's evaluation order (kind = index).
BLOCK_KINDS: Tuple[str, ...] = tuple(name for _, name, scope in NODE_KINDS if scope == "block")
BLOCK_KIND: Dict[str, int] = {name: KIND[ident] for ident, name, scope in NODE_KINDS if scope == "block"}
# Values recorded once per graph that the trace names (embedding.output ... loss).
GLOBAL_KIND: Dict[str, int] = {name: KIND[ident] for ident, name, scope in NODE_KINDS if scope == "global"}

EMBEDDING, FINAL_NORM_OUTPUT = KIND["EMBEDDING"], KIND["FINAL_NORM_OUTPUT"]
LOGITS, LOSS = KIND["LOGITS"], KIND["LOSS"]
PER_TARGET_NLL, GRADIENT = KIND["PER_TARGET_NLL"], KIND["GRADIENT"]
AFTER_ATTENTION = BLOCK_KIND["after_attention"]
BLOCK_OUTPUT = BLOCK_KIND["output"]
ATTENTION_OUTPUT = BLOCK_KIND["attention.output"]
FFN_OUTPUT = BLOCK_KIND["ffn.output"]


def node_name(block: int, kind: int) -> str:
    """The trace name of a (block, kind) value, e.g. 'blocks.1.ffn.up'."""
    name = NODE_KINDS[kind][1] if 0 <= kind < len(NODE_KINDS) else f"value {kind}"
    return name if block < 0 else f"blocks.{block}.{name}"


def parse_name(name: str) -> Tuple[int, int]:
    """(block, kind) of a trace name; KeyError when it names no recorded value."""
    if name in GLOBAL_KIND:
        return -1, GLOBAL_KIND[name]
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blocks" and parts[1].isdigit() and parts[2] in BLOCK_KIND:
        return int(parts[1]), BLOCK_KIND[parts[2]]
    from ..errors import UnknownNameError
    raise UnknownNameError(f"no recorded value is named {name!r}")
