# SPDX-License-Identifier: MIT
"""The depth check: a sweep preset over depths 1..64, seeds and both policies at the first
optimizer steps, with its figures and a terminal summary of where each policy leaves the band."""
from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass
from typing import Any, List, Optional, TextIO, Union

from .._files.atomic import write_bytes
from .errors import SweepStoreError
from .run import SweepResult, run
from .spec import SweepSpec
from .store import read_table
from .summary import BandExit, band_exits, cell_steps, summary_lines

__all__ = ["DEPTH_CHECK", "depth_check_spec", "DepthCheckResult", "depth_check", "SUMMARY_FILE", "FIGURES_DIR"]

#: The default grid of ``pydepth depth-check``.
DEPTH_CHECK = dict(depths=(1, 2, 4, 8, 16, 32, 64), widths=(16, 64), seeds=(0, 1, 2, 3, 4),
                   policies=("scaled", "unscaled"), steps=(0, 1, 2, 5, 10))
#: The summary written next to the results.
SUMMARY_FILE = "_summary.txt"
#: The subfolder of the results that holds the figures.
FIGURES_DIR = "_figures"

PathLike = Union[str, "os.PathLike[str]"]


def depth_check_spec(**changes: Any) -> SweepSpec:
    """The depth-check grid, with any :class:`SweepSpec` field changed (``None`` keeps the
    default)."""
    d = dict(DEPTH_CHECK)
    d.update({k: v for k, v in changes.items() if v is not None})
    return SweepSpec.from_dict(d)


@dataclass(frozen=True)
class DepthCheckResult:
    """The sweep, the band exits per width, policy and step, the summary and the figures."""

    sweep: SweepResult
    exits: List[BandExit]
    summary: List[str]
    figures: List[pathlib.Path]

    def _repr_html_(self) -> str:
        """The depth check as a notebook shows it: the verdict, where each policy leaves the
        band, the run's counts and, with matplotlib, the depth-check figure of each width."""
        from ..report.inline import sweep_store_html
        from .run import result_facts
        return sweep_store_html(self.sweep.out, result_facts(self.sweep))


def depth_check(spec: Optional[SweepSpec] = None, *, out: PathLike, scheduler: Optional[str] = None,
                resume: bool = True, workers: Optional[int] = None, plots: bool = True,
                progress: bool = True, stream: Optional[TextIO] = None,
                recompute_damaged: bool = False) -> DepthCheckResult:
    """Runs the depth-check sweep (default :data:`DEPTH_CHECK`) into ``out``, then writes
    ``_summary.txt`` there and, with ``plots``, the figures of :mod:`pydepth.sweep.plots` into
    ``out/_figures`` (beside the Parquet parts they would stop ``pyarrow.dataset`` reading ``out``)."""
    if plots:
        from ..plots.style import pyplot
        pyplot()  # a missing matplotlib is reported before any work
    spec = spec if spec is not None else depth_check_spec()
    result = run(spec, out=out, scheduler=scheduler, resume=resume, workers=workers,
                 progress=progress, stream=stream, recompute_damaged=recompute_damaged)
    table = read_table(out)
    steps = cell_steps(table)
    lines = summary_lines(steps, spec.band)
    write_bytes(pathlib.Path(out) / SUMMARY_FILE, ("\n".join(lines) + "\n").encode(), "summary", SweepStoreError)
    figures: List[pathlib.Path] = []
    if plots:
        from .plots import plot_sweep
        figures = plot_sweep(table, steps, pathlib.Path(out) / FIGURES_DIR, spec.band)
    return DepthCheckResult(result, band_exits(steps, spec.band), lines, figures)
