# SPDX-License-Identifier: MIT
"""The depth-transfer grid: parametrizations x depths x learning rates x seeds, each cell trained
for a fixed number of AdamW updates on one text with one data order (docs/depth-transfer.md).

Plain data only (ints, floats, strings), so a spec and its cells travel to Dask workers as they
are; the text travels as bytes beside them and the spec keeps its SHA-256.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Tuple

from ..config import DecoderConfig
from ..errors import InvalidBandError
from ..health import HEALTH_BAND, check_band
from ..parametrizations import PARAMETRIZATIONS
from .errors import SweepSpecError
from .spec import _int, _ints, _real, check_adamw_fields, grid_config, spec_fields, spec_from_dict

__all__ = ["TransferSpec", "TransferCell", "text_sha256", "parse_cell_id", "MAX_LRS"]

#: The most learning rates of one grid (each a column of the figure).
MAX_LRS = 64


def text_sha256(text: bytes) -> str:
    """The hex SHA-256 of the training text, kept in the spec so a rerun trains on the same bytes."""
    return hashlib.sha256(bytes(text)).hexdigest()


@dataclass(frozen=True)
class TransferCell:
    """One run of the grid: a decoder of ``depth`` blocks under ``parametrization``, trained at
    base learning rate ``lr`` from initialization seed ``seed``."""

    parametrization: str
    depth: int
    lr: float
    seed: int

    @property
    def cell_id(self) -> str:
        """``{parametrization}_d{depth}_lr{repr(lr)}_seed{seed}``: unique within a study (``repr`` of
        a float is its shortest exact spelling)."""
        return f"{self.parametrization}_d{self.depth}_lr{self.lr!r}_seed{self.seed}"


_CELL_ID = re.compile(r"([a-z0-9.-]+)_d(\d+)_lr([0-9.e+-]+)_seed(\d+)")


def parse_cell_id(text: str) -> TransferCell:
    """The cell of a cell id; :class:`SweepSpecError` if it is not one."""
    m = _CELL_ID.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise SweepSpecError(f"{str(text)[:80]!r} is not a depth-transfer cell id (expected "
                             "completep_d8_lr0.00390625_seed0)")
    name, depth, lr, seed = m.groups()
    try:
        value = float(lr)
    except ValueError:
        raise SweepSpecError(f"{text!r}: {lr!r} is not a learning rate") from None
    return TransferCell(name, int(depth), value, int(seed))


def _names(value: Any) -> Tuple[str, ...]:
    names = [p for p in value.replace(" ", "").split(",") if p] if isinstance(value, str) else value
    if not isinstance(names, Iterable) or isinstance(names, (bytes, Mapping)):
        raise SweepSpecError(f"parametrizations must be a list of names from {list(PARAMETRIZATIONS)}, "
                             f"got {str(value)[:80]}")
    out = tuple(names)
    if not out:
        raise SweepSpecError("parametrizations is empty")
    for n in out:
        if n not in PARAMETRIZATIONS:
            raise SweepSpecError(f"unknown parametrization {str(n)[:80]!r}; known: {list(PARAMETRIZATIONS)}")
    if len(set(out)) != len(out):
        raise SweepSpecError(f"parametrizations repeat a name: {out}")
    return out


def _lrs(value: Any) -> Tuple[float, ...]:
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
    if not isinstance(value, Iterable) or isinstance(value, (bytes, Mapping)):
        raise SweepSpecError(f"lrs must be a list of learning rates, got {str(value)[:80]}")
    out: List[float] = []
    for v in value:
        if len(out) == MAX_LRS:
            raise SweepSpecError(f"lrs holds more than {MAX_LRS} values")
        if isinstance(v, str):
            try:
                v = float(v[:40])
            except ValueError:
                raise SweepSpecError(f"lrs: cannot read {v[:40]!r} as a number") from None
        out.append(_real("lrs", v, low=0.0, high=1e3, open_low=True))
    if len(out) < 3:
        raise SweepSpecError(f"lrs needs at least 3 learning rates (a minimum and its neighbours), got {out}")
    if len(set(out)) != len(out):
        raise SweepSpecError(f"lrs repeats a value: {out}")
    return tuple(sorted(out))


@dataclass(frozen=True)
class TransferSpec:
    """A validated depth-transfer grid and the fixed model, data and optimizer of every cell.

    Model of a cell: ``layers=depth``, ``model_width=width``, ``heads=max(1, width //
    head_width)``, ``feed_forward_width=max(1, round(ff_ratio * width))``, byte vocabulary 256 and
    ``max_positions=sequence_length``. The text's paragraphs are split once: every
    ``heldout_every``-th paragraph (the last of each run of that many) is held out. Every cell
    draws its ``updates`` training batches (``batch_rows`` x ``sequence_length``) from the other
    paragraphs with ``SplitMix64(data_seed)``, the same sequence for every cell, and its held-out
    batch (``eval_rows`` rows) with ``SplitMix64(data_seed + 1)``. The optimizer is AdamW
    (``betas``, ``eps``, ``weight_decay``) on a warmup-cosine schedule (``warmup`` updates, down
    to a tenth of the peak at ``updates``), the peak being the cell's learning rate times the
    parametrization's factor for each group. Residual health at the end is classified in
    ``band``. ``text_sha256`` names the text the study trains on.
    """

    parametrizations: Tuple[str, ...]
    depths: Tuple[int, ...]
    lrs: Tuple[float, ...]
    seeds: Tuple[int, ...]
    text_sha256: str
    width: int = 32
    head_width: int = 8
    ff_ratio: float = 2.0
    sequence_length: int = 32
    batch_rows: int = 8
    eval_rows: int = 32
    updates: int = 100
    warmup: int = 10
    heldout_every: int = 10
    data_seed: int = 0
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    band: Tuple[float, float] = HEALTH_BAND
    _configs: Dict[int, DecoderConfig] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "parametrizations", _names(self.parametrizations))
        s(self, "depths", _ints("depths", self.depths, minimum=1, maximum=4096))
        s(self, "lrs", _lrs(self.lrs))
        s(self, "seeds", _ints("seeds", self.seeds, minimum=0, maximum=2**64 - 2))
        if not isinstance(self.text_sha256, str) or re.fullmatch(r"[0-9a-f]{64}", self.text_sha256) is None:
            raise SweepSpecError(f"text_sha256 must be 64 lower-case hex digits, got {str(self.text_sha256)[:80]!r}")
        for name, low, high in (("width", 2, 1 << 12), ("head_width", 2, 1 << 12), ("sequence_length", 1, 1 << 12),
                                ("batch_rows", 1, 1 << 10), ("eval_rows", 1, 1 << 12), ("updates", 1, 1 << 20),
                                ("warmup", 0, 1 << 20), ("heldout_every", 2, 1 << 10)):
            s(self, name, _int(name, getattr(self, name), minimum=low, maximum=high))
        if self.warmup > self.updates:
            raise SweepSpecError(f"warmup must be at most updates={self.updates}, got {self.warmup}")
        s(self, "data_seed", _int("data_seed", self.data_seed, minimum=0, maximum=2**64 - 2))
        s(self, "ff_ratio", _real("ff_ratio", self.ff_ratio, low=0.0, high=64.0, open_low=True))
        check_adamw_fields(self, s)
        try:
            s(self, "band", tuple(check_band(self.band)))
        except InvalidBandError as err:
            raise SweepSpecError(str(err)) from None
        for d in self.depths:  # every configuration is checked now, before any work
            self.config(d)

    def config(self, depth: int) -> DecoderConfig:
        """The byte-level decoder configuration of a cell of ``depth`` blocks."""
        cfg = self._configs.get(depth)
        if cfg is None:
            cfg = grid_config(256, self.width, self.head_width, self.ff_ratio, depth, self.sequence_length)
            self._configs[depth] = cfg
        return cfg

    def cells(self) -> List[TransferCell]:
        """Every cell, in grid order (parametrization, depth, learning rate, seed)."""
        return [TransferCell(p, d, lr, s) for p in self.parametrizations for d in self.depths
                for lr in self.lrs for s in self.seeds]

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serializable dict; ``TransferSpec.from_dict(spec.to_dict()) == spec``."""
        return spec_fields(self)

    def to_json(self) -> str:
        """The spec as canonical JSON (sorted keys): equal specs give equal text."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TransferSpec:
        """Builds a spec from :meth:`to_dict` output; unknown keys are refused."""
        return spec_from_dict(cls, d, "depth-transfer spec",
                              ("parametrizations", "depths", "lrs", "seeds", "text_sha256"))

    def replace(self, **changes: Any) -> TransferSpec:
        """A new spec with the fields given (not None) changed, validated again."""
        d = self.to_dict()
        unknown = sorted(set(changes) - set(d))
        if unknown:
            raise SweepSpecError(f"unknown depth-transfer spec fields {unknown}")
        d.update({k: v for k, v in changes.items() if v is not None})
        return TransferSpec.from_dict(d)

    @property
    def log2_lrs(self) -> Tuple[float, ...]:
        """``math.log2`` of each learning rate: the axis the optimum is found on."""
        return tuple(math.log2(lr) for lr in self.lrs)
