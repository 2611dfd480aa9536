# SPDX-License-Identifier: MIT
"""The depth-transfer summary: per parametrization and depth the best learning rate (the grid's
argmin of the seed-mean held-out loss, refined by a parabola in log2 of the learning rate through
the minimum and its two neighbours), how far that optimum drifts across depth in octaves, and
the best loss against depth."""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

from ..health import format_table
from ..parametrizations import PARAMETRIZATIONS

__all__ = ["CurvePoint", "Optimum", "Drift", "curves", "refine_minimum", "optima", "drifts", "verdict",
           "summary_lines"]


@dataclass(frozen=True)
class CurvePoint:
    """One (parametrization, depth, learning rate): held-out loss and end-of-training health,
    each the mean over the seeds; ``loss`` is ``inf`` when any seed stopped or diverged to a
    non-finite loss (such a point can never be the optimum)."""

    parametrization: str
    depth: int
    lr: float
    log2_lr: float
    loss: float
    activation_ratio_max: float
    adjoint_ratio_max: float
    seeds: int
    stopped: int


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def curves(table: Any) -> List[CurvePoint]:
    """Per (parametrization, depth, learning rate) the seed means of a stored table (from
    :func:`pydepth.sweep.transfer.read_transfer_table`), in grid order."""
    cols = table.select(["parametrization", "depth", "lr", "log2_lr", "heldout_loss", "activation_ratio_max",
                         "adjoint_ratio_max", "error"]).to_pydict()
    groups: Dict[Tuple[str, int, float], List[int]] = {}
    for i, key in enumerate(zip(cols["parametrization"], cols["depth"], cols["lr"])):
        groups.setdefault(key, []).append(i)
    order = {name: i for i, name in enumerate(PARAMETRIZATIONS)}
    out = []
    for (name, depth, lr), idx in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        stopped = sum(1 for i in idx if cols["error"][i] or not math.isfinite(cols["heldout_loss"][i]))
        loss = math.inf if stopped else _mean([cols["heldout_loss"][i] for i in idx])
        ok = [i for i in idx if not cols["error"][i]]
        out.append(CurvePoint(name, depth, lr, cols["log2_lr"][idx[0]], loss,
                              _mean([cols["activation_ratio_max"][i] for i in ok]),
                              _mean([cols["adjoint_ratio_max"][i] for i in ok]), len(idx), stopped))
    return out


def refine_minimum(xs: Sequence[float], ys: Sequence[float]) -> Tuple[float, int, str]:
    """``(x*, i, how)``: ``i`` is the grid argmin of ``ys`` (the first of ties; ``xs`` ascending),
    ``x*`` the vertex of the parabola through points i-1, i, i+1 when the minimum is interior,
    its neighbours are finite and the parabola opens upward (the vertex then lies between them);
    else ``x* = xs[i]``. ``how`` is ``"parabola"``, ``"edge"`` (the minimum is at an end of the
    grid: the true optimum may lie outside it), ``"grid"`` (no upward parabola) or ``"none"``
    (no finite loss)."""
    finite = [i for i, y in enumerate(ys) if math.isfinite(y)]
    if not finite:
        return math.nan, -1, "none"
    i = min(finite, key=lambda k: (ys[k], k))
    if i == 0 or i == len(xs) - 1:
        return xs[i], i, "edge"
    (x0, x1, x2), (y0, y1, y2) = xs[i - 1:i + 2], ys[i - 1:i + 2]
    if not (math.isfinite(y0) and math.isfinite(y2)):
        return xs[i], i, "grid"
    den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)
    if not den < 0.0:  # den < 0 exactly when the parabola through the three points opens upward
        return xs[i], i, "grid"
    num = (x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)
    return min(max(x1 - 0.5 * num / den, x0), x2), i, "parabola"


@dataclass(frozen=True)
class Optimum:
    """The best learning rate of one parametrization at one depth."""

    parametrization: str
    depth: int
    log2_lr: float
    grid_lr: float
    how: str
    loss: float
    activation_ratio_max: float
    adjoint_ratio_max: float
    stopped: int

    @property
    def lr(self) -> float:
        """``2 ** log2_lr``: the refined optimum."""
        return math.pow(2.0, self.log2_lr) if math.isfinite(self.log2_lr) else math.nan


def optima(points: Sequence[CurvePoint]) -> List[Optimum]:
    """The refined optimum of every (parametrization, depth) curve, in grid order."""
    by: Dict[Tuple[str, int], List[CurvePoint]] = {}
    for p in points:
        by.setdefault((p.parametrization, p.depth), []).append(p)
    out = []
    for (name, depth), pts in by.items():
        pts = sorted(pts, key=lambda p: p.lr)
        x, i, how = refine_minimum([p.log2_lr for p in pts], [p.loss for p in pts])
        best = pts[i] if i >= 0 else pts[0]
        out.append(Optimum(name, depth, x, best.lr if i >= 0 else math.nan, how, best.loss if i >= 0 else math.inf,
                           best.activation_ratio_max, best.adjoint_ratio_max, sum(p.stopped for p in pts)))
    return out


@dataclass(frozen=True)
class Drift:
    """How far one parametrization's optimum moves over the depths: ``octaves`` from the
    shallowest to the deepest depth (signed: negative when deeper models want a smaller rate),
    ``spread`` the largest minus the smallest optimum (octaves), ``edges`` how many optima lie at
    an end of the grid (a lower bound on the drift then)."""

    parametrization: str
    shallowest: int
    deepest: int
    octaves: float
    spread: float
    edges: int


def drifts(found: Sequence[Optimum]) -> List[Drift]:
    """The drift of each parametrization's optimum across its depths."""
    by: Dict[str, List[Optimum]] = {}
    for o in found:
        by.setdefault(o.parametrization, []).append(o)
    out = []
    for name, opts in by.items():
        opts = sorted((o for o in opts if math.isfinite(o.log2_lr)), key=lambda o: o.depth)
        if not opts:
            out.append(Drift(name, 0, 0, math.nan, math.nan, 0))
            continue
        xs = [o.log2_lr for o in opts]
        out.append(Drift(name, opts[0].depth, opts[-1].depth, xs[-1] - xs[0], max(xs) - min(xs),
                         sum(o.how == "edge" for o in opts)))
    return out


def _title(name: str) -> str:
    row = PARAMETRIZATIONS.get(name)
    return row.title if row is not None else name


def verdict(found: Sequence[Drift]) -> str:
    """One sentence: which parametrization's optimum drifts least and most across depth."""
    ok = [d for d in found if math.isfinite(d.spread)]
    if not ok:
        return "verdict: no parametrization reached a finite held-out loss"
    least = min(ok, key=lambda d: (d.spread, d.parametrization))
    most = max(ok, key=lambda d: (d.spread, d.parametrization))
    edge = " (some optima at the grid's edge: widen the learning rates)" if any(d.edges for d in ok) else ""
    return (f"verdict: the best learning rate moves least under {least.parametrization} ({least.spread:.2f} octaves "
            f"over depths {least.shallowest}-{least.deepest}) and most under {most.parametrization} "
            f"({most.spread:.2f} octaves){edge}")


#: the summary's width in characters (a terminal of 100 columns)
SUMMARY_WIDTH = 100


def summary_lines(points: Sequence[CurvePoint]) -> List[str]:
    """The terminal summary, verdict first: the drift of each parametrization, then its best
    learning rate and loss at every depth."""
    found = optima(points)
    moved = drifts(found)
    lines = [*textwrap.wrap(verdict(moved), SUMMARY_WIDTH, subsequent_indent="  "), ""]
    lines.append("Drift of the best learning rate across depth (octaves = log2 of the ratio of learning rates):")
    lines += format_table(("parametrization", "depths", "shallow->deep", "spread", "optima at edge"),
                          [(d.parametrization, f"{d.shallowest}-{d.deepest}", f"{d.octaves:+.2f}",
                            f"{d.spread:.2f}", str(d.edges)) for d in moved])
    lines.append("")
    lines.append("Best learning rate and held-out loss by depth (seed mean; lr refined by a parabola in log2 lr):")
    rows = [(o.parametrization, str(o.depth), f"{o.lr:.3g}", f"{o.log2_lr:+.2f}", o.how, f"{o.loss:.4f}",
             f"{o.activation_ratio_max:.3g}", f"{o.adjoint_ratio_max:.3g}", str(o.stopped)) for o in found]
    lines += format_table(("parametrization", "depth", "best lr", "log2", "found by", "loss", "max A", "max G",
                           "stopped"), rows)
    lines += textwrap.wrap("loss: the held-out mean loss (nats per byte) at the best grid learning rate; max A/G: "
                           "the largest A_s/A_0 and G_s/G_2L over the sites there at the end of training; stopped: "
                           "cells of that curve that stopped on a refusal or a non-finite loss. Titles: "
                           + "; ".join(f"{d.parametrization} = {_title(d.parametrization)}" for d in moved) + ".",
                           SUMMARY_WIDTH)
    return lines
