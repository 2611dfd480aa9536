# SPDX-License-Identifier: MIT
"""The depth-transfer study: does the best learning rate found at one depth stay best at another,
under each depth parametrization? (docs/depth-transfer.md)

Each cell of :class:`TransferSpec` is trained on Dask and stored in a sweep store of its own kind
(:data:`TRANSFER_STORE`: Parquet parts, ``_manifest.json``, the spec in ``_transfer.json`` and the
text in ``_text.txt``), so a killed study resumes and any cell reruns bit for bit from the store
alone. The summary (:mod:`.transfer_summary`) and the figure (:mod:`pydepth.plots.transfer`) are
written beside the parts.
"""
from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, TextIO, Union

from .._files.atomic import write_bytes
from .._files.reading import read_bytes
from .._native._bits import float_bits
from ..parametrizations import PARAMETRIZATIONS
from .errors import RowNotFoundError, SweepResumeError, SweepSpecError, SweepStoreError
from .progress import Progress
from .rerun import RerunComparison, RerunResult
from .run import Engine, check_engine
from .store import StoreKind, claimed, prepare_directory, read_spec, read_table, write_part
from .transfer_cell import TRANSFER_COLUMNS, UNCOMPARED, run_transfer_cells
from .transfer_spec import TransferCell, TransferSpec, parse_cell_id, text_sha256
from .transfer_summary import CurvePoint, curves, summary_lines

__all__ = ["TRANSFER_STORE", "TRANSFER_FORMAT", "TEXT_FILE", "SUMMARY_FILE", "FIGURES_DIR", "PRESETS",
           "transfer_spec", "TransferResult", "depth_transfer", "read_transfer_table", "read_transfer_spec",
           "rerun_transfer_cell"]

PathLike = Union[str, "os.PathLike[str]"]

#: Format tag of a depth-transfer store.
TRANSFER_FORMAT = "pydepth-depth-transfer-v1"
#: The store of a depth-transfer study (parts and manifest as a sweep's; its own spec and columns).
TRANSFER_STORE = StoreKind(TRANSFER_FORMAT, "_transfer.json", TRANSFER_COLUMNS, TransferSpec.from_dict,
                           ("parametrization", "depth", "lr", "seed"))
#: The training text, copied into the store so a rerun needs nothing else.
TEXT_FILE = "_text.txt"
#: The summary written next to the results.
SUMMARY_FILE = "_summary.txt"
#: The subfolder of the results that holds the figure.
FIGURES_DIR = "_figures"

_EVERY = tuple(PARAMETRIZATIONS)
#: The named grids: ``laptop`` runs in at most 10 minutes on 2 cores (docs/depth-transfer.md has the
#: measured time), ``cluster`` is the same study larger, for a Dask cluster.
PRESETS: Dict[str, Dict[str, Any]] = {
    "laptop": dict(parametrizations=_EVERY, depths=(2, 4, 8, 16), lrs=tuple(2.0 ** k for k in range(-10, 0)),
                   seeds=(0,), width=32, sequence_length=32, batch_rows=8, eval_rows=64, updates=200, warmup=20),
    "cluster": dict(parametrizations=_EVERY, depths=(2, 4, 8, 16, 32, 64),
                    lrs=tuple(2.0 ** (k / 2) for k in range(-24, -3)), seeds=(0, 1), width=64,
                    sequence_length=64, batch_rows=16, eval_rows=128, updates=500, warmup=50),
}


def _text_bytes(text: Union[bytes, PathLike]) -> bytes:
    if isinstance(text, (bytes, bytearray)):
        return bytes(text)
    return read_bytes(pathlib.Path(text), "training text", SweepStoreError)


def transfer_spec(text: Union[bytes, PathLike], preset: str = "laptop", **changes: Any) -> TransferSpec:
    """The ``preset`` grid (:data:`PRESETS`) for ``text`` (bytes or a file), with any
    :class:`TransferSpec` field changed (``None`` keeps the preset's)."""
    if preset not in PRESETS:
        raise SweepSpecError(f"unknown depth-transfer preset {str(preset)[:40]!r}; presets: {list(PRESETS)}")
    d: Dict[str, Any] = dict(PRESETS[preset], text_sha256=text_sha256(_text_bytes(text)))
    d.update({k: v for k, v in changes.items() if v is not None})
    return TransferSpec.from_dict(d)


@dataclass(frozen=True)
class TransferResult:
    """What a study did and found: cells computed now and found stored, the curves, the summary
    lines and the figures written."""

    out: pathlib.Path
    engine: str
    cells_total: int
    cells_run: int
    cells_resumed: int
    seconds: float
    points: List[CurvePoint]
    summary: List[str]
    figures: List[pathlib.Path]


def read_transfer_spec(out: PathLike) -> TransferSpec:
    """The spec of the study stored in ``out``."""
    spec: TransferSpec = read_spec(out, TRANSFER_STORE)
    return spec


def read_transfer_table(out: PathLike) -> Any:
    """Every stored row of ``out`` (one per cell) as an Arrow table in (parametrization, depth,
    lr, seed) order, equal for equal studies whatever the order the cells ran in."""
    return read_table(out, kind=TRANSFER_STORE)


def _stored_text(out: PathLike, spec: TransferSpec) -> bytes:
    path = pathlib.Path(out) / TEXT_FILE
    if not path.is_file():
        raise SweepStoreError(f"{out} holds no {TEXT_FILE}: the study's text is missing")
    data = read_bytes(path, "training text", SweepStoreError, inside=path.parent)
    if text_sha256(data) != spec.text_sha256:
        raise SweepStoreError(f"{path}: its SHA-256 is not the study's text_sha256 (edited or replaced)")
    return data


def _prepare(out: PathLike, spec: TransferSpec, text: bytes, resume: bool, repair: bool) -> set:
    if text_sha256(text) != spec.text_sha256:
        raise SweepResumeError(f"the text given is not the one the spec names (SHA-256 {spec.text_sha256[:16]}…)")
    done = prepare_directory(out, spec, resume=resume, repair=repair, kind=TRANSFER_STORE)
    if not (pathlib.Path(out) / TEXT_FILE).is_file():
        write_bytes(pathlib.Path(out) / TEXT_FILE, text, "training text", SweepStoreError)
    _stored_text(out, spec)
    return done


def _compute(out: PathLike, spec: TransferSpec, text: bytes, todo: List[TransferCell], scheduler: Optional[str],
             workers: Optional[int], bar: Progress) -> str:
    """Runs ``todo`` one cell per task, most expensive first, writing a part per finished cell."""
    engine = Engine(scheduler, workers)
    try:
        bar.note(f"{bar.label}: {engine.name} ready with {engine.workers} worker(s) after {bar.elapsed:.1f} s")
        ordered = sorted(todo, key=lambda c: (-c.depth, c.parametrization, c.lr, c.seed))
        tasks = [(spec.to_dict(), [(c.parametrization, c.depth, c.lr, c.seed)], text) for c in ordered]
        for columns in engine.results(run_transfer_cells, tasks):
            write_part(out, spec, columns, TRANSFER_STORE)
            bar.update(len(columns["cell_id"]))
        bar.close()
        return engine.name
    finally:
        engine.close()


def depth_transfer(spec: TransferSpec, text: Union[bytes, PathLike], *, out: PathLike,
                   scheduler: Optional[str] = None, workers: Optional[int] = None, resume: bool = True,
                   recompute_damaged: bool = False, plots: bool = True, progress: bool = True,
                   stream: Optional[TextIO] = None) -> TransferResult:
    """Runs every cell of ``spec`` not yet stored in ``out`` on ``text`` (bytes or a file whose
    SHA-256 is the spec's), then writes ``_summary.txt`` and, with ``plots``, the figure into
    ``out/_figures``. The engines and the resume rules are those of :func:`pydepth.sweep.run`."""
    if not isinstance(spec, TransferSpec):
        raise TypeError(f"spec must be a pydepth.sweep.TransferSpec, got {type(spec).__name__}")
    check_engine(scheduler, workers)
    if plots:
        from ..plots.style import pyplot
        pyplot()  # a missing matplotlib is reported before any work
    data = _text_bytes(text)
    bar = Progress(1, stream=stream, enabled=progress, label="depth-transfer")
    with claimed(out):
        done = _prepare(out, spec, data, resume, recompute_damaged)
        cells = spec.cells()
        todo = [c for c in cells if c.cell_id not in done]
        bar.total, bar.skipped = len(cells), len(cells) - len(todo)
        engine = _compute(out, spec, data, todo, scheduler, workers, bar) if todo else "none (all cells stored)"
        points = curves(read_transfer_table(out))
        lines = summary_lines(points)
        write_bytes(pathlib.Path(out) / SUMMARY_FILE, ("\n".join(lines) + "\n").encode(), "summary", SweepStoreError)
        figures: List[pathlib.Path] = []
        if plots:
            from ..plots.transfer import save_transfer_figure
            figures = save_transfer_figure(points, spec, pathlib.Path(out) / FIGURES_DIR / "depth-transfer")
    return TransferResult(pathlib.Path(out), engine, len(cells), len(todo), len(cells) - len(todo), bar.elapsed,
                          points, lines, figures)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return float_bits(a) == float_bits(b)  # NaN payloads and signed zeros compare exactly
    return bool(a == b) and type(a) is type(b)


def rerun_transfer_cell(out: PathLike, cell_id: str) -> RerunResult:
    """Recomputes the cell ``cell_id`` alone, in this process, from the spec and text stored in
    ``out``, and compares every stored value bit for bit (the measurements ``wall_time_s`` and
    ``cpu_time_s`` are shown, not compared). :class:`RowNotFoundError` if ``out`` has no such cell."""
    spec = read_transfer_spec(out)
    cell = parse_cell_id(cell_id)
    if cell not in spec.cells() or cell.cell_id != cell_id:
        raise RowNotFoundError(f"{cell_id!r} is not a cell of the study in {out}")
    table = read_transfer_table(out)
    ids = table.column("cell_id").to_pylist()
    if ids.count(cell_id) != 1:
        raise RowNotFoundError(f"{out} holds {ids.count(cell_id)} rows of cell {cell_id!r}")
    i = ids.index(cell_id)
    stored = {n: table.column(n)[i].as_py() for n, _ in TRANSFER_COLUMNS}
    fresh = run_transfer_cells(spec.to_dict(), [(cell.parametrization, cell.depth, cell.lr, cell.seed)],
                               _stored_text(out, spec))
    comparisons = []
    for name, _ in TRANSFER_COLUMNS:
        new = fresh[name][0]
        same = name in UNCOMPARED or _same(stored[name], new)
        comparisons.append(RerunComparison(name, stored[name], new, same, name not in UNCOMPARED))
    return RerunResult(cell_id, tuple(comparisons))
