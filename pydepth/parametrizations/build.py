# SPDX-License-Identifier: MIT
"""A native model and its AdamW built under a named depth parametrization (docs/depth-parametrizations.md).

:func:`build_parametrized` is the one call the depth-transfer study makes per cell: it draws the
Xavier base from ``SplitMix64(seed)``, multiplies each block's two residual output projections by
the row's init factor (one rounded multiply per element, skipped at 1.0, as the chapter's policy
does: docs/numerics.md §3.3), builds the model with the row's branch multipliers (§5.9) and an
AdamW whose per-parameter factors are the row's learning-rate, epsilon and weight-decay factors of
each parameter's group (docs/numerics-optimizers.md, per-parameter factors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Sequence, Tuple

from .._checks import as_u64
from .._native._bits import float_bits
from .._native._rng import SplitMix64
from ..config import DecoderConfig
from ..depth_init import DepthInitializationBudget
from ..errors import ArgumentTypeError, GeneratorStateError
from ..model import DecoderModel, NamedParameter
from ..optim import AdamW
from .table import DepthParametrization, get_parametrization, parameter_group

__all__ = [
    "ParametrizationRecord",
    "Parametrized",
    "build_parametrized",
    "initialize_parametrized",
    "optimizer_factors",
]

_RESIDUAL_OUTPUT = re.compile(r"blocks\.(0|[1-9][0-9]*)\.(?:attention\.output|ffn\.down)\.weight")


@dataclass(frozen=True)
class ParametrizationRecord:
    """What :func:`build_parametrized` did: the parametrization's name and source, the depth,
    the seed and the generator state after the base draw, every init factor and branch
    multiplier, the optimizer's base hyperparameters and each group's factors."""

    parametrization: str
    source: str
    layers: int
    seed: int
    final_rng_state: int
    init_factors: Tuple[float, ...]
    branch_multipliers: Tuple[float, ...]
    lr: float
    betas: Tuple[float, float]
    eps: float
    weight_decay: float
    group_factors: Mapping[str, Mapping[str, float]]

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serializable dict; every factor also as its 16-hex-digit bit pattern."""
        return {
            "format": "pydepth-parametrization-record-v1",
            "parametrization": self.parametrization,
            "source": self.source,
            "layers": self.layers,
            "seed": str(self.seed),
            "final_rng_state": str(self.final_rng_state),
            "init_factors": list(self.init_factors),
            "init_factor_bits": [float_bits(f) for f in self.init_factors],
            "branch_multipliers": list(self.branch_multipliers),
            "branch_multiplier_bits": [float_bits(f) for f in self.branch_multipliers],
            "lr": self.lr,
            "betas": list(self.betas),
            "eps": self.eps,
            "weight_decay": self.weight_decay,
            "group_factors": {g: dict(f) for g, f in self.group_factors.items()},
        }


@dataclass(frozen=True)
class Parametrized:
    """A built model, its optimizer and the record; unpacks as ``model, optimizer``."""

    model: DecoderModel
    optimizer: AdamW
    record: ParametrizationRecord

    def __iter__(self) -> Iterator[Any]:
        return iter((self.model, self.optimizer))


def _init_factor_of(row: DepthParametrization, layers: int, name: str) -> float:
    m = _RESIDUAL_OUTPUT.fullmatch(name)
    return 1.0 if m is None else row.init_factor(layers, int(m.group(1)))


def initialize_parametrized(
    base: Sequence[NamedParameter], row: DepthParametrization, layers: int
) -> List[NamedParameter]:
    """Independent copies of ``base`` in order, each residual output projection of block ``b``
    multiplied once by ``row.init_factor(layers, b)`` (skipped at 1.0; the chapter's row gives
    the bits of ``DepthScalePolicy.apply``). The given parameters are left as they were."""
    out = []
    for p in base:
        copy = NamedParameter(p.name, p.value)
        factor = _init_factor_of(row, layers, p.name)
        if factor != 1.0:
            copy._p.scale_values(factor)
        out.append(copy)
    return out


def optimizer_factors(row: DepthParametrization, layers: int, names: Sequence[str]) -> Dict[str, Dict[str, float]]:
    """``{name: {"lr", "eps", "weight_decay": factor}}`` for AdamW's ``factors`` from each
    parameter's group (:func:`pydepth.parametrizations.parameter_group`)."""
    by_group = row.group_factors(layers)
    return {n: dict(by_group[parameter_group(n)]) for n in names}


def build_parametrized(
    config: DecoderConfig,
    name: str,
    *,
    seed: int,
    lr: float,
    weight_decay: float = 0.0,
    eps: float = 1e-8,
    betas: Tuple[float, float] = (0.9, 0.999),
) -> Parametrized:
    """A model of ``config`` initialized, multiplied and optimized by the parametrization
    ``name`` (``pydepth.parametrizations.PARAMETRIZATIONS``), with an AdamW of base ``lr``,
    ``betas``, ``eps`` and ``weight_decay``. Unknown names, bad seeds and bad hyperparameters
    are refused with typed errors before anything is drawn."""
    if not isinstance(config, DecoderConfig):
        raise ArgumentTypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
    row = get_parametrization(name)
    layers = config.layers
    branch = row.branch_multiplier(layers)  # refuses layers == 0 like the depth policy
    seed = as_u64("seed", seed, GeneratorStateError)
    DepthInitializationBudget.for_config(config).check(config)
    rng = SplitMix64(seed)
    base = DecoderModel(config, rng)
    params = initialize_parametrized(base.parameters, row, layers)
    model = DecoderModel.from_parameters(config, params, branch_multipliers=branch)
    names = [p.name for p in model.parameters]
    optimizer = AdamW(
        model.parameters,
        lr=lr,
        betas=betas,
        eps=eps,
        weight_decay=weight_decay,
        factors=optimizer_factors(row, layers, names),
    )
    h = optimizer.hyperparameters()
    record = ParametrizationRecord(
        parametrization=row.name,
        source=row.source,
        layers=layers,
        seed=seed,
        final_rng_state=rng.state,
        init_factors=tuple(row.init_factor(layers, b) for b in range(layers)),
        branch_multipliers=model.branch_multipliers,
        lr=float(h["lr"]),
        betas=(h["betas"][0], h["betas"][1]),
        eps=h["eps"],
        weight_decay=h["weight_decay"],
        group_factors=row.group_factors(layers),
    )
    return Parametrized(model, optimizer, record)
