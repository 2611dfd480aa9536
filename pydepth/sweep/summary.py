# SPDX-License-Identifier: MIT
"""Aggregates of stored sweep rows: per cell and step, the largest ratios and the band verdict;
per width, policy and step, the depth at which a policy first leaves the band."""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ..health import LEGEND, format_table

__all__ = ["CellStep", "cell_steps", "BandExit", "band_exits", "summary_lines"]


@dataclass(frozen=True)
class CellStep:
    """One cell at one step: extreme site ratios, the loss and whether every site was within
    the band (``error`` is set when the cell stopped on a refusal at this step)."""

    depth: int
    width: int
    seed: int
    policy: str
    step: int
    activation_max: float
    activation_min: float
    adjoint_max: float
    adjoint_min: float
    loss: float
    within_band: bool
    error: str


def cell_steps(table: Any) -> List[CellStep]:
    """Per (cell, step) aggregates of a result table (from :func:`read_table`)."""
    cols = table.select(["depth", "width", "seed", "policy", "step", "site", "activation_ratio",
                         "adjoint_ratio", "loss", "within_band", "error"]).to_pydict()
    groups: Dict[Tuple[int, int, int, str, int], List[int]] = {}
    for i, key in enumerate(zip(cols["depth"], cols["width"], cols["seed"], cols["policy"], cols["step"])):
        groups.setdefault(key, []).append(i)
    out = []
    for key, idx in sorted(groups.items()):
        errors = [cols["error"][i] for i in idx if cols["error"][i]]
        if errors:
            nan = float("nan")
            out.append(CellStep(*key, nan, nan, nan, nan, nan, False, errors[0]))
            continue
        act = [cols["activation_ratio"][i] for i in idx]
        adj = [cols["adjoint_ratio"][i] for i in idx]
        out.append(CellStep(*key, max(act), min(act), max(adj), min(adj), cols["loss"][idx[0]],
                            all(cols["within_band"][i] for i in idx), ""))
    return out


@dataclass(frozen=True)
class BandExit:
    """Where one policy at one width and step first leaves the band over the sweep's depths."""

    width: int
    policy: str
    step: int
    depth: int  # 0 when no seed left the band at any depth
    seeds_out: int
    seeds: int
    cause: str  # which ratio left the band first ("activation above", ...), or "error"
    deepest: int
    deepest_seeds_out: int

    def sentence(self) -> str:
        """``unscaled leaves the band at depth 32 in 3 of 5 seeds (step 0, width 16)``."""
        where = f"(step {self.step}, width {self.width})"
        if not self.depth:
            return f"{self.policy} stays within the band up to depth {self.deepest} in all {self.seeds} seeds {where}"
        return (f"{self.policy} leaves the band at depth {self.depth} in {self.seeds_out} of {self.seeds} "
                f"seeds {where}, {self.cause}; at depth {self.deepest}: {self.deepest_seeds_out} of "
                f"{self.seeds}")


def _cause(cs: CellStep, band: Sequence[float]) -> str:
    if cs.error:
        return "error"
    low, high = band
    for name, hi, lo in (("activation", cs.activation_max, cs.activation_min),
                         ("adjoint", cs.adjoint_max, cs.adjoint_min)):
        if hi > high:
            return f"{name} ratio above {high:g}"
        if lo < low:
            return f"{name} ratio below {low:g}"
    return ""


def band_exits(steps: List[CellStep], band: Sequence[float]) -> List[BandExit]:
    """For each (width, policy, step): the smallest depth at which some seed leaves ``band``
    (the sweep's, as its rows were classified), how many seeds do there, why, and how many
    seeds are out at the deepest depth."""
    by: Dict[Tuple[int, str, int], Dict[int, List[CellStep]]] = {}
    for cs in steps:
        by.setdefault((cs.width, cs.policy, cs.step), {}).setdefault(cs.depth, []).append(cs)
    out = []
    for (width, policy, step), depths in sorted(by.items()):
        deepest = max(depths)
        seeds = max(len(v) for v in depths.values())
        first, n_out, cause = 0, 0, ""
        for d in sorted(depths):
            bad = [cs for cs in depths[d] if not cs.within_band]
            if bad:
                first, n_out = d, len(bad)
                causes = sorted({_cause(cs, band) for cs in bad})
                cause = " / ".join(causes)
                break
        deep_out = sum(1 for cs in depths[deepest] if not cs.within_band)
        out.append(BandExit(width, policy, step, first, n_out, seeds, cause, deepest, deep_out))
    return out


def _short(cause: str) -> str:
    """``adjoint ratio above 100`` as ``G > 100``: the table's column stays narrow."""
    for long, short in (("activation ratio", "A"), ("adjoint ratio", "G"), (" above ", " > "), (" below ", " < ")):
        cause = cause.replace(long, short)
    return cause


#: the summary's width in characters (a terminal of 100 columns)
SUMMARY_WIDTH = 100


def _fmt(x: float) -> str:
    return "error" if isinstance(x, float) and math.isnan(x) else f"{x:.4g}"


def verdict(exits: Sequence[BandExit], band: Sequence[float]) -> str:
    """One line per sweep: for each policy, whether any seed leaves the band, and from which depth."""
    parts = []
    for policy in dict.fromkeys(e.policy for e in exits):
        out = [e for e in exits if e.policy == policy and e.depth]
        if not out:
            parts.append(f"{policy} stays in the band at every depth, width and step")
            continue
        first = min(out, key=lambda e: (e.depth, e.step, e.width))
        parts.append(f"{policy} leaves it from depth {first.depth} (width {first.width}, step {first.step}, "
                     f"{first.seeds_out}/{first.seeds} seeds, {first.cause})")
    return f"verdict (band [{band[0]:g}, {band[1]:g}]): " + "; ".join(parts)


def summary_lines(steps: List[CellStep], band: Sequence[float]) -> List[str]:
    """The terminal summary: a table of first band exits and one sentence per policy and
    width at the first and the last observed step."""
    exits = band_exits(steps, band)
    deepest: Dict[Tuple[int, str, int], List[CellStep]] = {}
    for cs in steps:
        deepest.setdefault((cs.width, cs.policy, cs.step), []).append(cs)
    rows = []
    for e in exits:
        group = [cs for cs in deepest[(e.width, e.policy, e.step)] if cs.depth == e.deepest]
        act = np.nanmedian([cs.activation_max for cs in group]) if any(
            not math.isnan(cs.activation_max) for cs in group) else float("nan")
        adj = np.nanmedian([cs.adjoint_max for cs in group]) if any(
            not math.isnan(cs.adjoint_max) for cs in group) else float("nan")
        rows.append((str(e.width), e.policy, str(e.step),
                     str(e.depth) if e.depth else "-",
                     f"{e.seeds_out}/{e.seeds}" if e.depth else f"0/{e.seeds}",
                     _short(e.cause) or "-", f"{e.deepest_seeds_out}/{e.seeds}", _fmt(float(act)),
                     _fmt(float(adj))))
    low, high = band
    lines = [*textwrap.wrap(verdict(exits, band), SUMMARY_WIDTH, subsequent_indent="  "),
             *textwrap.wrap(LEGEND, SUMMARY_WIDTH, subsequent_indent="  "), ""]
    lines += [f"First depth out of the band [{low}, {high:g}] (any site, activation or adjoint ratio):"]
    lines += format_table(("width", "policy", "step", "first out", "seeds out", "why", "out deepest",
                           "max A deep", "max G deep"), rows)
    lines += textwrap.wrap("first out: the smallest depth where a seed leaves the band; out deepest: seeds "
                           "out at the deepest depth; max A/G deep: the median over seeds, at the deepest "
                           "depth, of the largest A_s/A_0 and G_s/G_2L over the sites.", SUMMARY_WIDTH)
    if exits:
        last = max(e.step for e in exits)
        first = min(e.step for e in exits)
        lines.append("")
        for e in exits:
            if e.step in (first, last):
                lines += textwrap.wrap(e.sentence(), SUMMARY_WIDTH, subsequent_indent="  ")
    return lines
