# SPDX-License-Identifier: MIT
"""The named depth parametrizations: one frozen row per rule of the literature (docs/depth-parametrizations.md).

A row says how a decoder of ``L`` complete blocks is initialized (a factor on the base draw of
each block's two residual output projections), whether each residual branch is multiplied in
the forward (docs/numerics.md §5.9), and how the optimizer's learning rate, epsilon and weight
decay scale with depth for each parameter group (docs/numerics-optimizers.md, per-parameter factors). Every factor
is computed once in Python as float64 by the expression the docs name; nothing here is a switch
on the name: the rows are the rules.
"""

from __future__ import annotations

import math
import operator
import re
from types import MappingProxyType
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Tuple

from ..depth_init import DepthScalePolicy
from ..errors import ArgumentTypeError, ParametrizationError

__all__ = [
    "GROUPS",
    "DEFAULT_PARAMETRIZATION",
    "DepthParametrization",
    "PARAMETRIZATIONS",
    "get_parametrization",
    "parameter_group",
]

#: The optimizer groups a native parameter belongs to (see :func:`parameter_group`).
GROUPS: Tuple[str, ...] = ("embedding", "hidden", "norm")
#: The parametrization every entry point uses unless told otherwise: today's policy.
DEFAULT_PARAMETRIZATION = "chapter"

_BLOCK_NORM = re.compile(r"blocks\.(0|[1-9][0-9]*)\.(?:attention_norm|ffn_norm)\.gain")
_BLOCK_MATRIX = re.compile(
    r"blocks\.(0|[1-9][0-9]*)\.(?:attention\.(?:query|key|value|output)|"
    r"ffn\.(?:gate|up|down))\.weight"
)
_OUTSIDE = ("token_embedding.weight", "final_norm.gain")  # outside the blocks: never depth-scaled


def parameter_group(name: str) -> str:
    """The group of the native parameter ``name``: ``"hidden"`` for a block's matrices,
    ``"norm"`` for a block's RMSNorm gains, ``"embedding"`` for the tensors outside the blocks
    (the tied token embedding and the final norm gain, µP's input/output group). Any other name
    raises :class:`ParametrizationError`."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"a parameter name must be a str, got {name!r:.80}")
    if name in _OUTSIDE:
        return "embedding"
    if _BLOCK_MATRIX.fullmatch(name):
        return "hidden"
    if _BLOCK_NORM.fullmatch(name):
        return "norm"
    raise ParametrizationError(f"{name!r:.120} is not a native decoder parameter name; groups are {list(GROUPS)}")


def _layers(layers: Any) -> int:
    """The checked depth: a positive int, refused like the depth policy refuses it."""
    return DepthScalePolicy(layers).depth


def _power(layers: int, exponent: float) -> float:
    # exponent 0 is exactly 1.0 without a call, so the control rows never touch math.pow
    return 1.0 if exponent == 0.0 else math.pow(float(layers), exponent)


def _no_init(layers: int, block: int) -> float:
    return 1.0


def _chapter_init(layers: int, block: int) -> float:
    return DepthScalePolicy(layers).factor  # 1.0 / math.sqrt(float(L)), the chapter's own bits


def _gpt2_init(layers: int, block: int) -> float:
    return 1.0 / math.sqrt(2.0 * float(layers))


def _torchtitan_init(layers: int, block: int) -> float:
    return 1.0 / math.sqrt(2.0 * float(block + 1))


def _exponents(embedding: float = 0.0, hidden: float = 0.0, norm: float = 0.0) -> Mapping[str, float]:
    return MappingProxyType({"embedding": embedding, "hidden": hidden, "norm": norm})


@dataclass(frozen=True)
class DepthParametrization:
    """One named depth parametrization: its initialization rule, its forward branch
    multiplier and its optimizer scaling with the number of complete blocks ``L``.

    ``branch_exponent`` e gives the branch multiplier ``math.pow(float(L), e)`` (0: none);
    ``lr_exponents`` / ``epsilon_exponents`` / ``weight_decay_exponents`` give each group's
    factor ``math.pow(float(L), e)`` (0: exactly 1.0)."""

    name: str
    title: str
    source: str
    init_rule: Callable[[int, int], float] = field(repr=False, compare=False)
    init_expression: str
    branch_exponent: float = 0.0
    lr_exponents: Mapping[str, float] = field(default_factory=_exponents)
    epsilon_exponents: Mapping[str, float] = field(default_factory=_exponents)
    weight_decay_exponents: Mapping[str, float] = field(default_factory=_exponents)

    def init_factor(self, layers: int, block: int) -> float:
        """The factor on the base draw of block ``block``'s ``attention.output.weight`` and
        ``ffn.down.weight`` in a decoder of ``layers`` blocks (``0 <= block < layers``)."""
        n = _layers(layers)
        if isinstance(block, bool):
            raise ParametrizationError(f"block must be an integer index, got {block!r}")
        try:
            b = operator.index(block)
        except TypeError:
            raise ParametrizationError(f"block must be an integer index, got {block!r:.80}") from None
        if not 0 <= b < n:
            raise ParametrizationError(f"block {b} is outside [0, {n}) for a decoder of {n} blocks")
        return self.init_rule(n, b)

    def branch_multiplier(self, layers: int) -> float:
        """The forward multiplier μ of every residual branch (docs/numerics.md §5.9); 1.0 is none."""
        return _power(_layers(layers), self.branch_exponent)

    def lr_factor(self, layers: int, group: str) -> float:
        """The factor on the base learning rate of the parameters in ``group``."""
        return _power(_layers(layers), self.lr_exponents[_group(group)])

    def epsilon_factor(self, layers: int, group: str) -> float:
        """The factor on AdamW's base epsilon for the parameters in ``group``."""
        return _power(_layers(layers), self.epsilon_exponents[_group(group)])

    def weight_decay_factor(self, layers: int, group: str) -> float:
        """The factor on the base weight decay of the parameters in ``group``."""
        return _power(_layers(layers), self.weight_decay_exponents[_group(group)])

    def group_factors(self, layers: int) -> Dict[str, Dict[str, float]]:
        """``{group: {"lr", "eps", "weight_decay": factor}}`` at depth ``layers``: what an
        optimizer's parameter group of each :data:`GROUPS` multiplies its base values by."""
        return {g: {"lr": self.lr_factor(layers, g), "eps": self.epsilon_factor(layers, g),
                    "weight_decay": self.weight_decay_factor(layers, g)} for g in GROUPS}

    def summary(self, layers: int) -> Mapping[str, Any]:
        """Every factor this row gives at depth ``layers``, as plain numbers (for records and docs)."""
        n = _layers(layers)
        return {
            "name": self.name,
            "layers": n,
            "init_factors": [self.init_factor(n, b) for b in range(n)],
            "branch_multiplier": self.branch_multiplier(n),
            "lr_factors": {g: self.lr_factor(n, g) for g in GROUPS},
            "epsilon_factors": {g: self.epsilon_factor(n, g) for g in GROUPS},
            "weight_decay_factors": {g: self.weight_decay_factor(n, g) for g in GROUPS},
        }


def _group(group: Any) -> str:
    if group not in GROUPS or not isinstance(group, str):
        raise ParametrizationError(f"unknown parameter group {group!r:.80}; groups are {list(GROUPS)}")
    return str(group)


_YANG = (
    'Yang, Yu, Zhu, Hayou, "Tensor Programs VI: Feature Learning in Infinite-Depth Neural Networks", '
    "arXiv:2310.02244 (ICLR 2024)"
)
_DEY = (
    "Dey, Zhang, Noci, Li, Bordelon, Bergsma, Pehlevan, Hanin, Hestness, \"Don't be lazy: CompleteP "
    'enables compute-efficient deep transformers", arXiv:2505.01618 (NeurIPS 2025)'
)

_ROWS: Tuple[DepthParametrization, ...] = (
    DepthParametrization(
        "chapter",
        "Chapter: 1/√L at initialization",
        "pydepth chapter 6 (docs/depth-policy.md); the residual-output rule of docs/numerics.md §3.3",
        _chapter_init,
        "1.0 / math.sqrt(float(L))",
    ),
    DepthParametrization(
        "gpt2",
        "GPT-2 / Megatron: 1/√(2L) at initialization",
        'Radford et al., "Language Models are Unsupervised Multitask Learners" (2019), §2.3; '
        "Shoeybi et al., Megatron-LM, arXiv:1909.08053, scaled_init_method_normal: sigma / sqrt(2 * num_layers)",
        _gpt2_init,
        "1.0 / math.sqrt(2.0 * float(L))",
    ),
    DepthParametrization(
        "torchtitan",
        "torchtitan: 1/√(2(b+1)) per block at initialization",
        "pytorch/torchtitan, torchtitan/models/llama3/model/model.py, TransformerBlock with depth_init=True: "
        "weight_init_std = 0.02 / (2 * (layer_id + 1)) ** 0.5",
        _torchtitan_init,
        "1.0 / math.sqrt(2.0 * float(b + 1))",
    ),
    DepthParametrization(
        "standard",
        "Standard parametrization (same base, no depth rule)",
        "the unscaled base initializer (Glorot & Bengio 2010 Xavier-uniform), the same-base control",
        _no_init,
        "1.0",
    ),
    DepthParametrization(
        "depth-mup",
        "Depth-µP (branch 1/√L, Adam LR 1/√L)",
        _YANG + ", Depth-µP with Adam (branch a/√L, block learning rates η/√L)",
        _no_init,
        "1.0",
        branch_exponent=-0.5,
        lr_exponents=_exponents(hidden=-0.5, norm=-0.5),
    ),
    DepthParametrization(
        "completep",
        "CompleteP (α = 1)",
        _DEY + ", Table 1 with α = 1 (rules as in the authors' nanoGPT-mup completep branch)",
        _no_init,
        "1.0",
        branch_exponent=-1.0,
        epsilon_exponents=_exponents(embedding=-1.0, hidden=-1.0, norm=-1.0),
    ),
    DepthParametrization(
        "completep-0.5",
        "CompleteP (α = 0.5)",
        _DEY + ", Table 1 with α = 0.5 (rules as in the authors' nanoGPT-mup completep branch)",
        _no_init,
        "1.0",
        branch_exponent=-0.5,
        lr_exponents=_exponents(hidden=-0.5, norm=-0.5),
        epsilon_exponents=_exponents(embedding=-0.5, hidden=-0.5, norm=-0.5),
    ),
)

#: The table of record: name -> row, in the order of the docs.
PARAMETRIZATIONS: Mapping[str, DepthParametrization] = MappingProxyType({row.name: row for row in _ROWS})


def get_parametrization(name: str) -> DepthParametrization:
    """The row named ``name``; an unknown name raises :class:`ParametrizationError` listing the names."""
    row = PARAMETRIZATIONS.get(name) if isinstance(name, str) else None
    if row is None:
        raise ParametrizationError(f"unknown depth parametrization {name!r:.80}; known: {list(PARAMETRIZATIONS)}")
    return row
