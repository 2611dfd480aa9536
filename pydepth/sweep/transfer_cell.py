# SPDX-License-Identifier: MIT
"""One depth-transfer cell: build the decoder under its parametrization, train it for the spec's
AdamW updates on the fixed data order, then measure the held-out loss and residual health.

:func:`build_cell` is the one place a parametrization becomes a model and its optimizers. The
Dask task :func:`run_transfer_cells` takes and returns plain values only (the spec as a dict,
cells as tuples, the text as bytes, rows as column lists).
"""
from __future__ import annotations

import math
import time
from typing import Any, Dict, List, Sequence, Tuple

from .._native._rng import SplitMix64
from ..batch import Batch
from ..errors import PydepthError
from ..model import DecoderModel
from ..optim import AdamW, WarmupCosine
from ..parametrizations import get_parametrization, initialize_parametrized, optimizer_factors
from ..training.step import byte_documents, draw_batch, observe_step, train_step
from .errors import SweepSpecError
from .transfer_spec import TransferCell, TransferSpec, text_sha256

__all__ = ["TRANSFER_COLUMNS", "UNCOMPARED", "split_documents", "heldout_batch", "build_cell",
           "run_transfer_cell", "run_transfer_cells"]

#: Result columns ``(name, kind, meaning)``, one row per cell; the stored Parquet schema is this order.
_COLUMN_TABLE = (
    ("row_id", "str", "the row's stable id (the cell id: one row per cell)"),
    ("cell_id", "str", "the cell's stable id"),
    ("parametrization", "str", "the depth parametrization (pydepth.parametrizations)"),
    ("depth", "int", "the cell's decoder blocks L"),
    ("lr", "float", "the base learning rate (each group's peak is this times its factor)"),
    ("log2_lr", "float", "math.log2(lr)"),
    ("seed", "uint", "the initialization seed"),
    ("branch_multiplier", "float", "the multiplier μ of every residual branch"),
    ("train_loss", "float", "the mean loss of the last training batch, before its update"),
    ("heldout_loss_initial", "float", "the held-out mean loss at initialization"),
    ("heldout_loss", "float", "the held-out mean loss after every update (NaN if the cell stopped)"),
    ("activation_ratio_max", "float", "largest A_s/A_0 over the sites, on the held-out batch at the end"),
    ("activation_ratio_min", "float", "smallest A_s/A_0 over the sites at the end"),
    ("adjoint_ratio_max", "float", "largest G_s/G_2L over the sites at the end"),
    ("adjoint_ratio_min", "float", "smallest G_s/G_2L over the sites at the end"),
    ("within_band", "bool", "whether every ratio at the end lies within the band"),
    ("parameters", "int", "the cell's parameter count"),
    ("error", "str", "empty, or the refusal that stopped the cell (`ErrorClass: message`)"),
    ("wall_time_s", "float", "seconds the cell took (a measurement)"),
    ("cpu_time_s", "float", "CPU seconds of the cell's process (a measurement)"),
)
#: ``(column, kind)`` in order, as the store reads them.
TRANSFER_COLUMNS: Tuple[Tuple[str, str], ...] = tuple((n, k) for n, k, _ in _COLUMN_TABLE)
#: Columns a rerun does not compare: measurements, not results.
UNCOMPARED = ("wall_time_s", "cpu_time_s")


def column_table() -> List[Tuple[str, str, str]]:
    """``(column, kind, meaning)`` of every result column (docs/depth-transfer.md shows it)."""
    return list(_COLUMN_TABLE)


def split_documents(text: bytes, every: int) -> Tuple[Tuple[Any, ...], Tuple[Any, ...]]:
    """(training, held-out) paragraphs of ``text``: paragraph i is held out when
    ``i % every == every - 1``."""
    docs = byte_documents(text)
    held = tuple(d for i, d in enumerate(docs) if i % every == every - 1)
    train = tuple(d for i, d in enumerate(docs) if i % every != every - 1)
    if not held or not train:
        raise SweepSpecError(f"the text has {len(docs)} paragraphs; holding out every {every}th leaves "
                             f"{len(train)} to train on and {len(held)} held out (need at least one each)")
    return train, held


def heldout_batch(spec: TransferSpec, held: Sequence[Any]) -> Batch:
    """The fixed held-out batch: ``eval_rows`` rows drawn from ``SplitMix64(data_seed + 1)``."""
    return draw_batch(held, SplitMix64(spec.data_seed + 1), spec.eval_rows, spec.sequence_length)


def build_cell(spec: TransferSpec, cell: TransferCell) -> Tuple[DecoderModel, AdamW]:
    """The cell's model and its AdamW, as :func:`pydepth.parametrizations.build_parametrized`
    makes them (the base draw from ``SplitMix64(seed)``, the row's init factors, its branch
    multipliers in the core's forward, its per-parameter learning-rate, epsilon and weight-decay
    factors), with the study's warmup-cosine schedule as the base learning rate."""
    row = get_parametrization(cell.parametrization)
    cfg = spec.config(cell.depth)
    base = DecoderModel(cfg, SplitMix64(cell.seed))
    params = initialize_parametrized(base.parameters, row, cell.depth)
    model = DecoderModel.from_parameters(cfg, params, branch_multipliers=row.branch_multiplier(cell.depth))
    schedule = WarmupCosine(cell.lr, warmup_steps=spec.warmup, total_steps=spec.updates, min_lr=cell.lr / 10)
    optimizer = AdamW(model.parameters, lr=schedule, betas=spec.betas, eps=spec.eps, weight_decay=spec.weight_decay,
                      factors=optimizer_factors(row, cell.depth, [p.name for p in model.parameters]))
    return model, optimizer


_NAN = math.nan


def _health(report: Any) -> Dict[str, Any]:
    act = [s.activation_ratio for s in report.sites]
    adj = [s.adjoint_ratio for s in report.sites]
    return {"activation_ratio_max": max(act), "activation_ratio_min": min(act),
            "adjoint_ratio_max": max(adj), "adjoint_ratio_min": min(adj), "within_band": report.within_band}


def run_transfer_cell(spec: TransferSpec, cell: TransferCell, train: Sequence[Any], held: Batch) -> Dict[str, Any]:
    """Trains one cell and returns its row (a dict keyed by column). A pydepth refusal (a
    non-finite value or update) stops the cell: its row has NaN losses and ratios and names the
    refusal in ``error``."""
    t0, c0 = time.perf_counter(), time.process_time()
    row: Dict[str, Any] = {"row_id": cell.cell_id, "cell_id": cell.cell_id, "parametrization": cell.parametrization,
                           "depth": cell.depth, "lr": cell.lr, "log2_lr": math.log2(cell.lr), "seed": cell.seed,
                           "branch_multiplier": get_parametrization(cell.parametrization).branch_multiplier(cell.depth),
                           "train_loss": _NAN, "heldout_loss_initial": _NAN, "heldout_loss": _NAN,
                           "activation_ratio_max": _NAN, "activation_ratio_min": _NAN, "adjoint_ratio_max": _NAN,
                           "adjoint_ratio_min": _NAN, "within_band": False, "error": ""}
    model, optimizer = build_cell(spec, cell)
    row["parameters"] = model.parameter_count
    rng = SplitMix64(spec.data_seed)
    try:
        row["heldout_loss_initial"], _ = observe_step(model, held)
        for _ in range(spec.updates):
            batch = draw_batch(train, rng, spec.batch_rows, spec.sequence_length)
            row["train_loss"], _ = train_step(model, optimizer, batch)
        loss, report = observe_step(model, held)
        row.update(heldout_loss=loss, **_health(report))
        if report.band != spec.band:
            row["within_band"] = all(spec.band[0] <= v <= spec.band[1] for v in (
                row["activation_ratio_max"], row["activation_ratio_min"], row["adjoint_ratio_max"],
                row["adjoint_ratio_min"]))
    except PydepthError as err:
        row.update(heldout_loss=_NAN, error=f"{type(err).__name__}: {err}")
    row["wall_time_s"] = time.perf_counter() - t0
    row["cpu_time_s"] = time.process_time() - c0
    return row


def run_transfer_cells(spec_dict: Dict[str, Any], cells: Sequence[Tuple[str, int, float, int]],
                       text: bytes) -> Dict[str, List[Any]]:
    """The Dask task: runs cells ``(parametrization, depth, lr, seed)`` of the spec in order on
    ``text`` (checked against the spec's SHA-256) and returns their rows as column lists."""
    spec = TransferSpec.from_dict(spec_dict)
    if text_sha256(text) != spec.text_sha256:
        raise SweepSpecError(f"the text's SHA-256 {text_sha256(text)[:16]}… is not the study's "
                             f"{spec.text_sha256[:16]}…")
    train, held_docs = split_documents(text, spec.heldout_every)
    held = heldout_batch(spec, held_docs)
    out: Dict[str, List[Any]] = {name: [] for name, _ in TRANSFER_COLUMNS}
    for c in cells:
        row = run_transfer_cell(spec, TransferCell(*c), train, held)
        for name, _ in TRANSFER_COLUMNS:
            out[name].append(row[name])
    return out
