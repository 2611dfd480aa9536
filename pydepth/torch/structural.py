# SPDX-License-Identifier: MIT
"""The decoder layout from structural recognition (:mod:`.recognition`): how the probe forward is
called, and how its finding becomes the :class:`DecoderLayout` that observation, scaling and the
audit all read. The table of :mod:`.architectures` only names what was found."""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from torch import nn

from .layout import DecoderLayout, ResidualProjection
from .probe import probe_ids
from .recognition import StructureFinding, probe_structure

__all__ = ["Recognition", "recognize", "model_type", "vocabulary", "forward_hint"]

#: What to do when a probe forward raises a known error: (text in the error, the hint).
_FORWARD_HINTS = (
    ("Expected mat_a to be Float32", "transformers' grouped experts have no float64 kernel: build the model with "
     "experts_implementation=\"eager\" (in the config or from_pretrained/from_config)"),
)


def forward_hint(err: BaseException) -> str:
    """The hint for a forward that raised ``err`` (empty when none is known)."""
    text = str(err)
    return next((f" — {hint}" for key, hint in _FORWARD_HINTS if key in text), "")

_ROLES = ("attention-output", "feed-forward-output")


@dataclass(frozen=True)
class Recognition:
    """What structural recognition concluded: a layout, a refusal (the probe ran and the structure
    is not an additive residual), or why the probe could not run (the table decides then)."""

    layout: Optional[DecoderLayout] = None
    refusal: Optional[str] = None
    not_run: Optional[str] = None


def vocabulary(module: nn.Module) -> Optional[int]:
    """The token vocabulary size from a Hugging Face config or the first embedding table."""
    cfg = getattr(module, "config", None)
    v = getattr(cfg, "vocab_size", None) or getattr(cfg, "vocabulary_size", None)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    for m in module.modules():
        if isinstance(m, nn.Embedding):
            return m.num_embeddings
    return None


def model_type(module: nn.Module) -> Optional[str]:
    """A Hugging Face model's ``config.model_type`` (None for other modules)."""
    value = getattr(getattr(module, "config", None), "model_type", None)
    return value if isinstance(value, str) and value else None


def _accepts(module: nn.Module, name: str) -> bool:
    try:
        return name in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return False


def _probe_call(module: nn.Module) -> Union[str, Callable[[], Any]]:
    vocab = vocabulary(module)
    if vocab is None:
        return "no vocabulary size (config.vocab_size or an nn.Embedding) to draw probe tokens from"
    ids = probe_ids(module, vocab)
    if _accepts(module, "input_ids"):
        kwargs: Dict[str, Any] = {"input_ids": ids}
        if _accepts(module, "use_cache"):
            kwargs["use_cache"] = False
        return lambda: module(**kwargs)
    return lambda: module(ids)


def _projections(module: nn.Module, finding: StructureFinding) -> Tuple[Tuple[ResidualProjection, ...], Optional[str]]:
    names = {id(p): n for n, p in module.named_parameters()}
    out: List[ResidualProjection] = []
    for b, f in enumerate(finding.findings):
        for role, scaled in zip(_ROLES, f.scaled):
            if isinstance(scaled, str):
                return (), f"{finding.stack_path}.{b}: {scaled}"
            out.extend(ResidualProjection(b, role, names[id(p)], p, kind, off) for _, p, kind, off in scaled)
    if len({id(p.parameter) for p in out}) != len(out):
        return (), "a scaled tensor is shared by two branches or layers (tied weights): one factor cannot be applied"
    return tuple(out), None


def _name(module: nn.Module, layout: DecoderLayout, finding: StructureFinding,
          table_name: Callable[[DecoderLayout], Optional[str]]) -> str:
    """The table's name when one spec describes the same tensors with unit multipliers; else the
    model type (or class) the structure was found in."""
    unit = all(m == 1.0 for f in finding.findings for m in f.multipliers)
    named = table_name(layout) if unit else None
    return named or model_type(module) or type(module).__name__


def _layout(module: nn.Module, finding: StructureFinding,
            table_name: Callable[[DecoderLayout], Optional[str]]) -> DecoderLayout:
    projections, unscalable = _projections(module, finding)
    fs = finding.findings
    parallel = fs[0].parallel
    post = fs[0].post_norms
    placement = "pre" if not any(post) else ("post" if post_reads(fs[0]) else "sandwich")
    layout = DecoderLayout(
        architecture="", depth=len(fs), projections=projections,
        layers=finding.layers, layer_paths=tuple(f"{finding.stack_path}.{b}" for b in range(len(fs))),
        attention_outputs=tuple(f.added[0] for f in fs), feed_forward_outputs=tuple(f.added[1] for f in fs),
        attention_norms=tuple(f.norms[0] for f in fs), feed_forward_norms=tuple(f.norms[1] for f in fs),
        mid_norms=tuple(f.mid for f in fs), final_norm=finding.final_norm, parallel_residual=parallel,
        norm_placement=placement, gain_offset=finding.gain_offset,
        attention_added=tuple(f.added[0] for f in fs), feed_forward_added=tuple(f.added[1] for f in fs),
        attention_multipliers=tuple(f.multipliers[0] for f in fs),
        feed_forward_multipliers=tuple(f.multipliers[1] for f in fs), unscalable=unscalable)
    return dataclasses.replace(layout, architecture=_name(module, layout, finding, table_name))


def post_reads(finding: Any) -> bool:
    """Whether the feed-forward block itself reads the stream (no pre-norm: OLMo2's ``post``)."""
    return finding.mid is not None and "norm" not in type(finding.mid).__name__.lower()


def recognize(module: nn.Module, table_name: Callable[[DecoderLayout], Optional[str]]) -> Recognition:
    """Structural recognition of ``module``; ``table_name`` names a found layout (None: unnamed)."""
    try:
        call = _probe_call(module)
        if isinstance(call, str):
            return Recognition(not_run=call)
        finding = probe_structure(module, call)
    except LookupError as err:
        return Recognition(not_run=str(err))
    except Exception as err:  # the probe forward itself failed: the table decides, the reason is kept
        first = str(err).splitlines()[0][:200] if str(err) else ""
        return Recognition(not_run=f"the probe forward raised {type(err).__name__}: {first}{forward_hint(err)}")
    if isinstance(finding, str):
        return Recognition(refusal=finding)
    return Recognition(layout=_layout(module, finding, table_name))
