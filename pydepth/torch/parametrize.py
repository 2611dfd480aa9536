# SPDX-License-Identifier: MIT
"""A named depth parametrization (:mod:`pydepth.parametrizations`) applied to a torch / Hugging
Face decoder: the row's init factor on the recognized residual outputs, its branch multiplier
as a forward hook on the modules whose outputs the residual stream adds, and its learning-rate,
epsilon and weight-decay factors as optimizer parameter groups (docs/numerics-torch.md §10).

The init factors go through :func:`.scaling.apply_depth_scaling` (one rounded multiply per
element, recorded and guarded like every scaling); the branch multiplier is a
:class:`BranchMultiplier` forward hook, which ``deepcopy``, ``load_state_dict`` and
``torch.compile`` keep (it holds no tensor, so ``state_dict`` keys are unchanged) and which the
Hugging Face config records (``save_pretrained`` keeps the record, not the hook: see
:func:`restore_branch_multipliers`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import torch
from torch import nn

from .._checks import as_positive_finite
from ..bridge.schemes import DepthScalingRecord
from ..errors import AlreadyScaledError, ArchitectureError, ArgumentTypeError, InvalidHyperparameterError
from ..parametrizations import GROUPS, DepthParametrization, get_parametrization
from .architectures import ArchitectureSpec, DecoderLayout, resolve_layout
from .norms import is_norm
from .scaling import check_module_and_force, scalable_layout, scale_layout
from .schemes import scheme_name

__all__ = [
    "BranchMultiplier",
    "TorchParametrizationRecord",
    "apply_parametrization",
    "parameter_groups",
    "torch_parameter_group",
    "branch_multipliers_of",
    "restore_branch_multipliers",
    "CONFIG_KEY",
]

#: The Hugging Face config attribute (``config.json`` key) recording the applied parametrization.
CONFIG_KEY = "pydepth_parametrization"


class BranchMultiplier:
    """A forward hook multiplying a branch module's output (a tensor, or the first tensor of a
    tuple) by ``multiplier``: one rounded multiply per element in the output's dtype. A plain
    object with one float, so ``deepcopy`` and pickling keep it and ``torch.compile`` traces it."""

    def __init__(self, multiplier: float, parametrization: str) -> None:
        self.multiplier = float(multiplier)
        self.parametrization = parametrization

    def __call__(self, module: nn.Module, args: Any, output: Any) -> Any:
        if isinstance(output, torch.Tensor):
            return output * self.multiplier
        if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
            return (output[0] * self.multiplier, *output[1:])
        raise ArchitectureError(
            f"{type(module).__name__} returned {type(output).__name__}; a branch multiplier "
            "needs a tensor (or a tuple starting with one)"
        )

    def __repr__(self) -> str:
        return f"BranchMultiplier({self.multiplier!r}, {self.parametrization!r})"


@dataclass(frozen=True)
class TorchParametrizationRecord:
    """What :func:`apply_parametrization` did: the row's name, title and source, the layout's
    architecture and depth, the init scaling's record (every tensor, its factor and scale before
    and after), the branch multiplier and the modules hooked with it, each group's
    learning-rate / epsilon / weight-decay factors, and whether it was a forced repeat."""

    parametrization: str
    title: str
    source: str
    architecture: str
    depth: int
    scaling: DepthScalingRecord
    branch_multiplier: float
    hooked_modules: Tuple[str, ...]
    group_factors: Mapping[str, Mapping[str, float]]
    forced: bool = False

    def summary(self) -> Dict[str, Any]:
        """A JSON-serializable summary (what the Hugging Face config keeps)."""
        return {
            "parametrization": self.parametrization,
            "architecture": self.architecture,
            "depth": self.depth,
            "branch_multiplier": self.branch_multiplier,
            "hooked_modules": list(self.hooked_modules),
            "group_factors": {g: dict(f) for g, f in self.group_factors.items()},
            "forced": self.forced,
        }

    def to_dict(self) -> Dict[str, Any]:
        """The summary, the source and the scaling record's rows."""
        return {
            **self.summary(),
            "title": self.title,
            "source": self.source,
            "scaling": [t.to_dict() for t in self.scaling.tensors],
        }


def _init_scheme(row: DepthParametrization) -> Callable[[int, int], float]:
    def factor(layer: int, depth: int) -> float:
        return row.init_factor(depth, layer)

    factor.__qualname__ = f"parametrization {row.name}"  # the scaling record's scheme name
    return factor


def _hooks(module: nn.Module) -> List[Tuple[str, BranchMultiplier]]:
    """(module path, hook) of every branch multiplier already on ``module``'s submodules."""
    return [
        (path, h)
        for path, sub in module.named_modules()
        for h in sub._forward_hooks.values()
        if isinstance(h, BranchMultiplier)
    ]


def branch_multipliers_of(module: nn.Module) -> Dict[str, float]:
    """``{submodule path: multiplier}`` of the branch multipliers hooked on ``module``."""
    out: Dict[str, float] = {}
    for path, h in _hooks(module):
        out[path] = out.get(path, 1.0) * h.multiplier
    return out


def _branch_modules(module: nn.Module, layout: DecoderLayout) -> List[Tuple[str, nn.Module]]:
    if not layout.layers:
        raise ArchitectureError(
            f"{type(module).__name__}: a layout from name patterns names no branch modules; "
            "a parametrization needs the recognized layers (drop patterns=)"
        )
    paths = {id(m): p for p, m in module.named_modules()}
    out = [(paths[id(m)], m) for pair in zip(layout.attention_added, layout.feed_forward_added) for m in pair]
    if len({id(m) for _, m in out}) != len(out):
        raise ArchitectureError(
            f"{type(module).__name__}: one module produces two branches; a multiplier on it would multiply both"
        )
    return out


def _names_of(records: Any) -> List[str]:
    items = records if isinstance(records, list) else [records]
    return [str(r.get("parametrization")) if isinstance(r, dict) else repr(r)[:40] for r in items]


def _hf_config(module: nn.Module) -> Any:
    cfg = getattr(module, "config", None)
    return cfg if callable(getattr(cfg, "to_json_string", None)) else None


def _earlier(module: nn.Module, row: DepthParametrization,
             force: bool) -> Tuple[List[Tuple[str, BranchMultiplier]], Any]:
    """The branch multipliers already on ``module`` and the parametrizations its config records;
    refused (:class:`pydepth.AlreadyScaledError`) when either says applied, unless ``force``."""
    present = _hooks(module)
    if present and not force:
        path, hook = present[0]
        raise AlreadyScaledError(
            f"{type(module).__name__} already carries branch multipliers ({hook!r} on "
            f"{path!r} and {len(present) - 1} more); applying {row.name!r} again multiplies "
            "them — pass force=True if that is what you want"
        )
    cfg = _hf_config(module)
    recorded = getattr(cfg, CONFIG_KEY, None) if cfg is not None else None
    if recorded and not present and not force:  # the config says applied, the hooks are gone
        raise AlreadyScaledError(
            f"{type(module).__name__}'s config records {CONFIG_KEY} {_names_of(recorded)} but the model carries no "
            "branch multipliers: a model loaded with from_pretrained lost its hooks (restore_branch_multipliers "
            "puts them back); for a fresh model built from that config pass force=True"
        )
    return present, recorded


def apply_parametrization(
    module: nn.Module, name: str, *, architecture: Union[str, ArchitectureSpec, None] = None, force: bool = False
) -> TorchParametrizationRecord:
    """Applies the named depth parametrization ``name`` (``pydepth.parametrizations.PARAMETRIZATIONS``)
    to ``module`` in place and returns the record.

    Block ``b``'s recognized residual outputs are multiplied by ``init_factor(L, b)`` through
    :func:`apply_depth_scaling` (recorded and guarded like any scaling, a factor of 1 included);
    when ``branch_multiplier(L) != 1`` every module whose output a residual branch adds gets a
    :class:`BranchMultiplier` forward hook. The optimizer rules are :func:`parameter_groups`.
    Refused with :class:`pydepth.AlreadyScaledError`, nothing changed, when the model carries a
    branch multiplier, its Hugging Face config records a parametrization, or a depth scaling is
    recorded (or audited) already; ``force=True`` applies it
    anyway (multiplying again). Unknown names raise :class:`pydepth.ParametrizationError`."""
    check_module_and_force(module, force)
    row = get_parametrization(name)
    layout = scalable_layout(module, architecture, None, None, "parametrized")
    depth = layout.depth
    mu = row.branch_multiplier(depth)
    branches = _branch_modules(module, layout) if mu != 1.0 else []
    present, recorded = _earlier(module, row, force)
    scheme = _init_scheme(row)
    scaling = scale_layout(module, layout, scheme, scheme_name(scheme), force)  # the layout found above
    for _, m in branches:
        m.register_forward_hook(BranchMultiplier(mu, row.name))
    record = TorchParametrizationRecord(
        parametrization=row.name,
        title=row.title,
        source=row.source,
        architecture=layout.architecture,
        depth=depth,
        scaling=scaling,
        branch_multiplier=mu,
        hooked_modules=tuple(p for p, _ in branches),
        group_factors=row.group_factors(depth),
        forced=scaling.forced or bool(present) or bool(recorded),
    )
    cfg = _hf_config(module)
    if cfg is not None:  # apply_depth_scaling gave the model a config of its own: the sibling keeps its own
        setattr(cfg, CONFIG_KEY, [*copy.deepcopy(getattr(cfg, CONFIG_KEY, None) or []), record.summary()])
    return record


def restore_branch_multipliers(module: nn.Module) -> Dict[str, float]:
    """Hooks the branch multipliers a Hugging Face config records (``config.pydepth_parametrization``,
    kept by ``save_pretrained``) back onto a reloaded model that has none, and returns them by
    module path. Refused with :class:`pydepth.AlreadyScaledError` when hooks are present; a model
    without a record gets nothing (``{}``)."""
    if not isinstance(module, nn.Module):
        raise ArgumentTypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if _hooks(module):
        raise AlreadyScaledError(f"{type(module).__name__} already carries branch multipliers")
    cfg = _hf_config(module)
    records = getattr(cfg, CONFIG_KEY, None) if cfg is not None else None
    if not isinstance(records, list):
        return {}
    paths = dict(module.named_modules())
    plan: List[Tuple[nn.Module, float, str]] = []
    for rec in records:
        mu = rec.get("branch_multiplier", 1.0) if isinstance(rec, dict) else None
        hooked = rec.get("hooked_modules", []) if isinstance(rec, dict) else None
        if not isinstance(mu, float) or not isinstance(hooked, list) or any(p not in paths for p in hooked):
            raise ArchitectureError(f"config.{CONFIG_KEY} does not describe this model's modules: {rec!r:.200}")
        plan.extend((paths[p], mu, str(rec.get("parametrization"))) for p in hooked)
    for m, mu, name in plan:
        m.register_forward_hook(BranchMultiplier(mu, name))
    return branch_multipliers_of(module)


def torch_parameter_group(module: nn.Module, layout: DecoderLayout) -> Dict[int, str]:
    """``{id(parameter): group}`` for every parameter of ``module``: inside a recognized layer,
    a norm module's parameters (gain and bias) are ``"norm"`` and every other parameter
    (matrices, projection biases) ``"hidden"``; every parameter outside the layers (token and
    position embeddings, the final norm, an untied output head) is ``"embedding"``, as pydepth's
    :func:`pydepth.parametrizations.parameter_group` puts the tensors outside its blocks."""
    if not layout.layers:
        raise ArchitectureError(
            f"{type(module).__name__}: a layout from name patterns names no layers to group parameters by"
        )
    out: Dict[int, str] = {}
    for layer in layout.layers:
        for sub in layer.modules():
            kind = "norm" if is_norm(sub) else "hidden"
            for p in sub.parameters(recurse=False):
                out.setdefault(id(p), kind)
    for p in module.parameters():
        out.setdefault(id(p), "embedding")
    return out


def _base(field: str, value: Any) -> float:
    if field == "weight_decay" and isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
        return 0.0
    return as_positive_finite(field, value, InvalidHyperparameterError)


def parameter_groups(
    module: nn.Module,
    name: str,
    *,
    lr: float,
    weight_decay: float = 0.0,
    eps: Optional[float] = 1e-8,
    architecture: Union[str, ArchitectureSpec, None] = None,
) -> List[Dict[str, Any]]:
    """Optimizer parameter groups of ``module`` under the depth parametrization ``name``: one dict
    per non-empty group (``embedding``, ``hidden``, ``norm``; see :func:`torch_parameter_group`)
    with ``params``, ``lr = lr * lr_factor``, ``weight_decay = weight_decay * weight_decay_factor``,
    ``eps = eps * epsilon_factor`` (left out when ``eps`` is None, for SGD) and ``group`` (its
    name). A factor of 1.0 leaves the base value as given. ``torch.optim.AdamW(parameter_groups(...))``
    then takes the row's rates; the model is only read."""
    if not isinstance(module, nn.Module):
        raise ArgumentTypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    row = get_parametrization(name)
    base = {"lr": _base("lr", lr), "weight_decay": _base("weight_decay", weight_decay)}
    if eps is not None:
        base["eps"] = _base("eps", eps)
    layout = resolve_layout(module, architecture, None, None)
    groups = torch_parameter_group(module, layout)
    factors = row.group_factors(layout.depth)
    members: Dict[str, List[nn.Parameter]] = {g: [] for g in GROUPS}
    for p in module.parameters():
        members[groups[id(p)]].append(p)
    out: List[Dict[str, Any]] = []
    for g in GROUPS:
        if not members[g]:
            continue
        entry: Dict[str, Any] = {"params": members[g], "group": g}
        for field, value in base.items():
            f = factors[g][field]
            entry[field] = value if f == 1.0 else value * f
        out.append(entry)
    return out
