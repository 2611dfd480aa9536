"""One cell of a sweep: build, initialize, step, observe; returns plain result columns.

Runs on a Dask worker or in the caller's process alike: the inputs are a spec dict and cell
tuples, the output is a dict of Python lists, so nothing un-picklable travels either way.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from .._native._core import SplitMix64
from ..depth_init import DepthInitializationBudget, FreshDepthInitialization
from ..errors import PydepthError
from ..health import observe_residual_health
from ..model import DecoderModel
from .errors import OptimizerUnavailableError, SweepSpecError
from .spec import Cell, SweepSpec, row_id

__all__ = ["COLUMNS", "draw_batch", "build_model", "run_cell", "run_cells", "optimizer_class"]

#: Result columns in order, with their kinds (``str``, ``int``, ``uint``, ``float``, ``bool``).
#: ``wall_time_s`` is the only column that differs between two runs of the same cell.
COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("row_id", "str"), ("cell_id", "str"), ("depth", "int"), ("width", "int"), ("seed", "uint"),
    ("policy", "str"), ("step", "int"), ("site", "int"), ("site_label", "str"),
    ("activation_ratio", "float"), ("adjoint_ratio", "float"),
    ("activation_rms", "float"), ("adjoint_rms", "float"),
    ("activation_status", "str"), ("adjoint_status", "str"),
    ("loss", "float"), ("within_band", "bool"), ("factor", "float"), ("parameters", "int"),
    ("error", "str"), ("wall_time_s", "float"),
)


def optimizer_class() -> Any:
    """``pydepth.optim.AdamW``, or :class:`OptimizerUnavailableError` when it is missing."""
    try:
        from ..optim import AdamW  # type: ignore[import-not-found,attr-defined]
    except ImportError:
        raise OptimizerUnavailableError(
            "optimizer steps after 0 need pydepth.optim.AdamW, which this pydepth does not have; "
            "sweep steps [0] only") from None
    return AdamW


def draw_batch(spec: SweepSpec) -> Tuple[np.ndarray, np.ndarray]:
    """The fixed batch of every cell: ``batch_rows x (sequence_length + 1)`` ids drawn row-major
    as ``next_u64() % vocabulary_size`` from ``SplitMix64(data_seed)``; inputs are the first
    ``sequence_length`` ids of each row, targets the last ``sequence_length``."""
    rng = SplitMix64(spec.data_seed)
    n = spec.sequence_length + 1
    ids = np.array([rng.next_u64() % spec.vocabulary_size for _ in range(spec.batch_rows * n)],
                   dtype=np.int64).reshape(spec.batch_rows, n)
    return np.ascontiguousarray(ids[:, :-1]), np.ascontiguousarray(ids[:, 1:])


def build_model(spec: SweepSpec, cell: Cell) -> Tuple[DecoderModel, float]:
    """The cell's model and the factor applied to its selected tensors: one fresh draw from
    ``SplitMix64(seed)``; ``scaled`` completes pydepth's depth initialization, ``unscaled``
    keeps snapshots of the same base (the chapter's same-base control, factor 1)."""
    if cell.policy not in spec.policies:
        raise SweepSpecError(f"policy {cell.policy!r} is not in this sweep's policies {spec.policies}")
    cfg = spec.config(cell.depth, cell.width)
    budget = DepthInitializationBudget(max_parameters=cfg.parameter_count, max_positions=cfg.max_positions)
    fresh = FreshDepthInitialization.prepare(cfg, budget, SplitMix64(cell.seed))
    if cell.policy == "scaled":
        init = fresh.complete()
        return init.model, init.record.factor
    return fresh.base_model.clone(), 1.0


def _empty() -> Dict[str, List[Any]]:
    return {name: [] for name, _ in COLUMNS}


def health_rows(t: int, report: Any, loss: float) -> List[Tuple[Any, ...]]:
    """One step's rows (one per residual site) of a health report, either backend's."""
    return [(t, r.site, r.label, r.activation_ratio, r.adjoint_ratio, r.activation_rms, r.adjoint_rms,
             r.activation_status.value, r.adjoint_status.value, loss, report.within_band, "")
            for r in report.sites]


def error_row(t: int, err: BaseException) -> Tuple[Any, ...]:
    """The one row (site -1, NaN ratios) that ends a cell refused at step t."""
    nan = float("nan")
    return (t, -1, "", nan, nan, nan, nan, "", "", nan, False, f"{type(err).__name__}: {err}")


def append_rows(out: Dict[str, List[Any]], cell: Cell, rows: Sequence[Tuple[Any, ...]], factor: float,
                params: int, wall: float) -> None:
    """Appends a cell's step rows to the column lists ``out`` in COLUMNS order."""
    for (t, site, label, ar, gr, arms, grms, ast, gst, lv, within, error) in rows:
        values = (row_id(cell, t, site), cell.cell_id, cell.depth, cell.width, cell.seed, cell.policy,
                  t, site, label, ar, gr, arms, grms, ast, gst, lv, within, factor, params, error, wall)
        for (name, _), v in zip(COLUMNS, values):
            out[name].append(v)


def run_cell(spec: SweepSpec, cell: Cell, out: Dict[str, List[Any]], *,
             batch: Tuple[np.ndarray, np.ndarray]) -> None:
    """Runs one cell and appends its rows (step x site) to the column lists ``out``.

    At every step t = 0 .. max_step: zero the gradients, forward and mean loss on the fixed
    batch, then either observe residual health (its reverse pass gives the gradients) when t is
    a listed step, or an ordinary ``loss.backward()``; then one AdamW update unless t is the
    last step. A pydepth refusal (a non-finite value; a refused update, reported at the step it
    would have produced) ends the cell with one row (site -1, NaN ratios) whose ``error`` names it.
    ``spec.backend == "torch"`` runs the cell through :func:`pydepth.sweep.torch_cell.run_torch_cell`."""
    if cell.width not in spec.widths or cell.depth not in spec.depths or cell.seed not in spec.seeds:
        raise SweepSpecError(f"cell {cell.cell_id} is not in this sweep's grid")
    if spec.backend == "torch":
        from .torch_cell import run_torch_cell
        run_torch_cell(spec, cell, out, batch=batch)
        return
    t0 = time.perf_counter()
    ids, targets = batch
    model, factor = build_model(spec, cell)
    listed = set(spec.steps)
    opt = optimizer_class()(model.parameters, lr=spec.lr, betas=tuple(spec.betas), eps=spec.eps,
                            weight_decay=spec.weight_decay) if spec.max_step > 0 else None
    rows: List[Tuple[Any, ...]] = []
    for t in range(spec.max_step + 1):
        reached = t  # a refused update is reported at the step it could not reach
        try:
            model.zero_grad()
            fwd = model.forward(ids)
            loss = fwd.loss(targets)
            if t in listed:
                report = observe_residual_health(model, fwd, loss, band=spec.band)
                rows.extend(health_rows(t, report, loss.item()))
            else:
                loss.backward()
            fwd.release()
            if opt is not None and t < spec.max_step:
                reached = t + 1
                opt.step()
        except PydepthError as err:
            rows.append(error_row(reached, err))
            break
    append_rows(out, cell, rows, factor, model.parameter_count, time.perf_counter() - t0)


def run_cells(spec_dict: Dict[str, Any], cells: Sequence[Tuple[int, int, int, str]]) -> Dict[str, List[Any]]:
    """The Dask task: runs cells ``(depth, width, seed, policy)`` of the spec ``spec_dict`` in
    order and returns their rows as column lists (plain Python values only)."""
    spec = SweepSpec.from_dict(spec_dict)
    batch = draw_batch(spec)
    out = _empty()
    for c in cells:
        run_cell(spec, Cell(*c), out, batch=batch)
    return out

