# SPDX-License-Identifier: MIT
"""Where a JAX decoder's residual sites are, and the report built from what the taps summed.

Every library is described the same way (:class:`ResidualSites`): which modules are the blocks,
the name of each block's attention submodule (the term added to the residual first; the mid
residual is the block input plus its output) and, for a stacked or scanned stack, the layer
axis of its leaves. The report is pydepth's own :class:`pydepth.DepthHealthReport`, built by
:func:`pydepth.health.health_report_from_rms` (one owner of ratios, band and labels).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import SiteSpecError
from ..health import BandLike, BranchHealthRow, DepthHealthReport, health_report_from_rms

__all__ = ["ResidualSites", "report_from_sums", "resolve_attribute"]


@dataclass(frozen=True)
class ResidualSites:
    """Where the residual sites of a JAX decoder are.

    ``blocks``: for Flax Linen a regular expression matched in full against a module's path
    (names joined by ``/``), whose first group captures the layer index of an unrolled block
    (``r"layers_(\\d+)"``) or that names the one scanned module (``"decoder/layers"``); for NNX
    and Equinox the attribute path from the model (``"layers"``, ``"transformer.stack"``) of a
    list of blocks or of one stacked module. ``attention``: the attribute name of the submodule
    whose output each block adds to the residual first (``None`` for a single-branch block: then
    only block inputs and outputs are sites). ``layer_axis``: ``None`` for unrolled blocks, else
    the axis of the layer in the stacked leaves (Linen ``nn.scan``'s ``variable_axes`` for
    params, e.g. MaxText's ``param_scan_axis=1``; 0 for ``nnx.vmap`` and Equinox
    ``filter_vmap``). ``attention_norm``, ``mid_norm`` (the feed-forward norm) and ``final_norm``
    (a path from the model root, as ``blocks``) name norms whose gains the report lists; optional.
    ``method`` is the block's method that Linen calls (default ``__call__``)."""

    blocks: str
    attention: Optional[str]
    layer_axis: Optional[int] = None
    attention_norm: Optional[str] = None
    mid_norm: Optional[str] = None
    final_norm: Optional[str] = None
    method: str = "__call__"

    def __post_init__(self) -> None:
        if not isinstance(self.blocks, str) or not self.blocks:
            raise SiteSpecError(f"blocks must be a non-empty string, got {self.blocks!r}")
        for field in ("attention", "attention_norm", "mid_norm", "final_norm"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value):
                raise SiteSpecError(f"{field} must be a non-empty string or None, got {value!r}")
        axis = self.layer_axis
        if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int) or axis < 0):
            raise SiteSpecError(f"layer_axis must be None or a non-negative integer, got {axis!r}")
        try:
            re.compile(self.blocks)
        except re.error as err:
            raise SiteSpecError(f"blocks {self.blocks!r} is not a regular expression: {err}") from None

    @property
    def stacked(self) -> bool:
        """Whether the blocks are one stacked (scanned) module."""
        return self.layer_axis is not None

    @property
    def stack_axis(self) -> int:
        """The layer axis of a stacked module's leaves; :class:`SiteSpecError` for unrolled blocks."""
        if self.layer_axis is None:
            raise SiteSpecError(f"the blocks {self.blocks!r} are unrolled: they have no layer axis")
        return self.layer_axis


def resolve_attribute(root: Any, path: str) -> Any:
    """``root.a.b[2].c`` for ``path`` ``"a.b.2.c"``; a missing part raises :class:`SiteSpecError`."""
    node = root
    for part in path.split("."):
        try:
            node = node[int(part)] if part.isdigit() else getattr(node, part)
        except (AttributeError, IndexError, KeyError, TypeError):
            raise SiteSpecError(f"{type(root).__name__} has no {path!r} (no {part!r} in "
                                f"{type(node).__name__})") from None
    return node


def _rms(total: float, count: float) -> float:
    return math.sqrt(total / count)


def _check_counts(sums: np.ndarray, attention: bool) -> float:
    rows = [0, 1, 2] if attention else [0, 2]
    counts = sums[:, rows, 2]
    n = float(counts[0, 0])
    if not n > 0.0 or not np.all(counts == n):
        bad = np.argwhere(counts != n)
        b = int(bad[0][0]) if len(bad) else 0
        raise SiteSpecError(f"the sites of block {b} saw {counts[b].tolist()} elements where block 0's input "
                            f"saw {n}: a block (or its attention) ran more or less than once per forward")
    return n


def report_from_sums(sums: Any, *, attention: bool, band: BandLike = None,
                     gains: Optional[Sequence[Tuple[Tuple[float, ...], Tuple[float, ...]]]] = None,
                     final_norm_gain: Sequence[float] = ()) -> DepthHealthReport:
    """The report from per-block sums ``[L, 3, 5]`` (rows input, mid, output; columns Σx², Σg²,
    elements, Σbranch², positions): RMS values, then pydepth's own ratios and band."""
    s = np.asarray(sums, dtype=np.float64)
    if s.ndim != 3 or s.shape[1:] != (3, 5) or s.shape[0] == 0:
        raise SiteSpecError(f"site sums must have shape [layers, 3, 5], got {s.shape}")
    n = _check_counts(s, attention)
    positions = float(s[0, 0, 4])
    rows = [(0, 0)] + [(b, r) for b in range(s.shape[0]) for r in ((1, 2) if attention else (2,))]
    acts = [_rms(s[b, r, 0], n) for b, r in rows]
    grads = [_rms(s[b, r, 1], n) for b, r in rows]
    labels: Optional[List[str]] = None
    branches: Tuple[BranchHealthRow, ...] = ()
    if attention:
        branches = tuple(BranchHealthRow(block=b, attention_output_rms=_rms(s[b, 1, 3], n),
                                         feed_forward_output_rms=_rms(s[b, 2, 3], n),
                                         attention_norm_gain=gains[b][0] if gains else (),
                                         feed_forward_norm_gain=gains[b][1] if gains else ())
                         for b in range(s.shape[0]))
    else:
        labels = ["input"] + [f"block.{b}.output" for b in range(s.shape[0])]
    # a JAX or numpy scalar's round() keeps its own type: int() makes the counts plain integers
    valid, width = int(round(positions)), int(round(n / positions))  # noqa: RUF046
    return health_report_from_rms(acts, grads, valid_positions=valid, width=width, band=band, labels=labels,
                                  branches=branches, final_norm_gain=final_norm_gain)
