# SPDX-License-Identifier: MIT
"""The sweep grid: depths x widths x seeds x policies, observed at chosen optimizer steps.

A *cell* is one (depth, width, seed, policy) run; a *row* of the results is one cell x step x
residual site. Everything here is plain data (ints, floats, strings), so specs and cells pickle
and travel to Dask workers as they are.
"""
from __future__ import annotations

import json
import math
import numbers
import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Iterable, List, Mapping, Tuple

from .._files.reading import read_json
from ..config import DecoderConfig
from ..errors import ConfigError, InvalidBandError
from ..health import HEALTH_BAND, check_band
from .errors import SweepSpecError

__all__ = ["POLICIES", "BACKENDS", "MAX_VALUES", "MAX_PAIRS", "MAX_CELLS", "SweepSpec", "Cell", "parse_int_list",
           "row_id", "parse_row_id"]

#: ``scaled``: pydepth's depth policy; ``unscaled``: the same base draw left unscaled (the control).
POLICIES: Tuple[str, ...] = ("scaled", "unscaled")
#: ``pydepth``: the C core; ``torch``: the same draw in pydepth's torch twin, observed by hooks.
BACKENDS: Tuple[str, ...] = ("pydepth", "torch")

_MAX_DEPTH = 4096
_MAX_STEP = 100_000
#: The most values one list of a spec holds (depths, widths, seeds, steps).
MAX_VALUES = 1 << 17
#: The most (depth, width) pairs, each one model configuration checked before any work.
MAX_PAIRS = 4096
#: The most cells of one sweep (depth x width x seed x policy).
MAX_CELLS = 250_000


def parse_int_list(text: str, what: str = "value") -> List[int]:
    """``"1,2,4"``, ``"0-4"`` (inclusive) or mixtures such as ``"0-2,7"``, as a list of ints."""
    if not isinstance(text, str):
        raise SweepSpecError(f"{what} must be a string such as '0-4' or '1,2,4', got {text!r}")
    out: List[int] = []
    for part in text.replace(" ", "").split(","):
        if part == "":
            continue
        m = re.fullmatch(r"(\d{1,20})(?:-(\d{1,20}))?", part)
        if m is None:
            raise SweepSpecError(f"{what}: cannot read {part!r} in {text!r} (expected N or N-M)")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise SweepSpecError(f"{what}: range {part!r} runs backwards")
        if hi - lo > 100_000:
            raise SweepSpecError(f"{what}: range {part!r} has more than 100000 values")
        if len(out) + hi - lo + 1 > MAX_VALUES:
            raise SweepSpecError(f"{what}: {text[:60]!r} names more than {MAX_VALUES} values")
        out.extend(range(lo, hi + 1))
    if not out:
        raise SweepSpecError(f"{what}: {text!r} names no value")
    return out


def _ints(name: str, values: Any, *, minimum: int, maximum: int) -> Tuple[int, ...]:
    if isinstance(values, str):
        values = parse_int_list(values, name)
    if isinstance(values, (bool, numbers.Integral)) or not isinstance(values, Iterable):
        raise SweepSpecError(f"{name} must be a list of integers, got {str(values)[:80]}")
    out: List[int] = []
    seen = set()
    for v in values:
        if len(out) == MAX_VALUES:
            raise SweepSpecError(f"{name} holds more than {MAX_VALUES} values")
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise SweepSpecError(f"{name} must hold integers, got {v!r}")
        if not minimum <= int(v) <= maximum:
            raise SweepSpecError(f"{name} must lie in [{minimum}, {maximum}], got {int(v)}")
        if int(v) in seen:  # a set: linear in the number of values
            raise SweepSpecError(f"{name} repeats {int(v)}")
        seen.add(int(v))
        out.append(int(v))
    if not out:
        raise SweepSpecError(f"{name} is empty")
    return tuple(out)


def _real(name: str, value: Any, *, low: float, high: float, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SweepSpecError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < low or v > high or (open_low and v == low):
        bracket = "(" if open_low else "["
        raise SweepSpecError(f"{name} must be finite and in {bracket}{low}, {high}], got {value!r}")
    return v


def _int(name: str, value: Any, *, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise SweepSpecError(f"{name} must be an integer, got {value!r}")
    if not minimum <= int(value) <= maximum:
        raise SweepSpecError(f"{name} must lie in [{minimum}, {maximum}], got {int(value)}")
    return int(value)


def check_adamw_fields(spec: Any, set_field: Callable[[Any, str, Any], None]) -> None:
    """Checks and normalizes a study spec's AdamW fields (``betas``, ``eps``, ``weight_decay``),
    the one rule of every study's grid, setting each through ``set_field(spec, name, value)``."""
    betas = spec.betas
    if isinstance(betas, (str, bytes)) or not isinstance(betas, Iterable) or len(tuple(betas)) != 2:
        raise SweepSpecError(f"betas must be two numbers, got {betas!r}")
    set_field(spec, "betas", tuple(_real("betas", b, low=0.0, high=1.0) for b in betas))
    if spec.betas[0] >= 1.0 or spec.betas[1] >= 1.0:
        raise SweepSpecError(f"betas must each be below 1, got {spec.betas!r}")
    set_field(spec, "eps", _real("eps", spec.eps, low=0.0, high=1.0, open_low=True))
    set_field(spec, "weight_decay", _real("weight_decay", spec.weight_decay, low=0.0, high=1e3))


def spec_fields(spec: Any) -> Dict[str, Any]:
    """A spec dataclass's JSON form: its public fields in declaration order, tuples as lists."""
    return {f.name: _plain(getattr(spec, f.name)) for f in fields(spec) if not f.name.startswith("_")}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def spec_from_dict(cls: Any, d: Any, what: str, required: Iterable[str]) -> Any:
    """``cls(**d)`` after the checks every spec's ``from_dict`` makes first: ``d`` is a JSON
    object, holds no key that is not a public field, and holds the ``required`` ones."""
    if not isinstance(d, Mapping):
        raise SweepSpecError(f"a {what} must be a JSON object, got {type(d).__name__}")
    unknown = sorted(set(d) - {f.name for f in fields(cls) if not f.name.startswith("_")})
    if unknown:
        raise SweepSpecError(f"{what} has unknown keys {unknown}")
    missing = [k for k in required if k not in d]
    if missing:
        raise SweepSpecError(f"{what} is missing {', '.join(missing)}")
    return cls(**dict(d))


def grid_config(vocabulary_size: int, width: int, head_width: int, ff_ratio: float, depth: int,
                sequence_length: int) -> DecoderConfig:
    """The decoder of a grid cell: ``width // head_width`` heads (at least one), a feed-forward
    width of ``round(ff_ratio * width)`` (at least one); a refusal names the cell's width and depth
    (the one rule of every study's grid: sweeps, depth checks, depth transfer)."""
    try:
        return DecoderConfig(vocabulary_size, width, max(1, width // head_width), max(1, round(ff_ratio * width)),
                             depth, sequence_length)
    except ConfigError as err:
        raise SweepSpecError(f"width {width}, depth {depth}: {err}") from None


@dataclass(frozen=True)
class Cell:
    """One run of the grid: a model of ``depth`` blocks and ``width`` features, initialized
    from ``seed`` under ``policy``."""

    depth: int
    width: int
    seed: int
    policy: str

    @property
    def cell_id(self) -> str:
        """``d{depth}_w{width}_seed{seed}_{policy}``: unique within a sweep."""
        return f"d{self.depth}_w{self.width}_seed{self.seed}_{self.policy}"


def row_id(cell: Cell, step: int, site: int) -> str:
    """The id of one stored row: ``{cell_id}_step{step}_site{site}``."""
    return f"{cell.cell_id}_step{step}_site{site}"


_ROW_ID = re.compile(r"d(\d+)_w(\d+)_seed(\d+)_([a-z]+)_step(\d+)_site(-?\d+)")


def parse_row_id(text: str) -> Tuple[Cell, int, int]:
    """(cell, step, site) of a row id; :class:`SweepSpecError` if it is not one."""
    m = _ROW_ID.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise SweepSpecError(f"{text!r} is not a row id (expected d8_w16_seed0_scaled_step5_site3)")
    d, w, s, policy, step, site = m.groups()
    return Cell(int(d), int(w), int(s), policy), int(step), int(site)


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep grid and the fixed shape, batch and optimizer of every cell.

    Model of a cell: ``layers=depth``, ``model_width=width``, ``heads=max(1, width //
    head_width)``, ``feed_forward_width=max(1, round(ff_ratio * width))``, vocabulary
    ``vocabulary_size`` and ``max_positions=sequence_length``. The fixed batch (``batch_rows``
    rows of ``sequence_length`` inputs and next-token targets) is drawn once from ``SplitMix64(data_seed)`` as
    ``next_u64() % vocabulary_size`` and is the same for every cell. Steps after 0 are AdamW
    updates (``lr``, ``betas``, ``eps``, ``weight_decay``) on that batch; residual health is
    observed at every step listed in ``steps`` and classified in the inclusive ``band``.
    ``backend="torch"`` runs each cell through the torch bridge instead of the C core.
    """

    depths: Tuple[int, ...]
    widths: Tuple[int, ...]
    seeds: Tuple[int, ...]
    policies: Tuple[str, ...] = POLICIES
    steps: Tuple[int, ...] = (0,)
    vocabulary_size: int = 266
    head_width: int = 8
    ff_ratio: float = 1.0
    sequence_length: int = 16
    batch_rows: int = 1
    data_seed: int = 0
    lr: float = 1e-3
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01
    band: Tuple[float, float] = HEALTH_BAND
    backend: str = "pydepth"
    _configs: Dict[Tuple[int, int], DecoderConfig] = field(default_factory=dict, init=False,
                                                           repr=False, compare=False)

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "depths", _ints("depths", self.depths, minimum=1, maximum=_MAX_DEPTH))
        s(self, "widths", _ints("widths", self.widths, minimum=2, maximum=1 << 16))
        s(self, "seeds", _ints("seeds", self.seeds, minimum=0, maximum=2**64 - 1))
        pol = self.policies
        if isinstance(pol, str):
            pol = [p for p in pol.replace(" ", "").split(",") if p]
        if not isinstance(pol, Iterable) or not list(pol):
            raise SweepSpecError(f"policies must be a non-empty list from {POLICIES}, got {self.policies!r}")
        pol = tuple(pol)
        for p in pol:
            if p not in POLICIES:
                raise SweepSpecError(f"policy must be one of {', '.join(POLICIES)}, got {p!r}")
        if len(set(pol)) != len(pol):
            raise SweepSpecError(f"policies repeat a name: {pol}")
        s(self, "policies", pol)
        s(self, "steps", tuple(sorted(_ints("steps", self.steps, minimum=0, maximum=_MAX_STEP))))
        s(self, "vocabulary_size", _int("vocabulary_size", self.vocabulary_size, minimum=2, maximum=1 << 24))
        s(self, "head_width", _int("head_width", self.head_width, minimum=2, maximum=1 << 16))
        s(self, "ff_ratio", _real("ff_ratio", self.ff_ratio, low=0.0, high=64.0, open_low=True))
        s(self, "sequence_length", _int("sequence_length", self.sequence_length, minimum=1, maximum=1 << 16))
        s(self, "batch_rows", _int("batch_rows", self.batch_rows, minimum=1, maximum=1 << 12))
        s(self, "data_seed", _int("data_seed", self.data_seed, minimum=0, maximum=2**64 - 1))
        s(self, "lr", _real("lr", self.lr, low=0.0, high=1e3, open_low=True))
        check_adamw_fields(self, s)
        if self.backend not in BACKENDS:
            raise SweepSpecError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        try:
            s(self, "band", tuple(check_band(self.band)))
        except InvalidBandError as err:
            raise SweepSpecError(str(err)) from None
        self._check_size()
        for d in self.depths:  # every configuration is checked now, before any work
            for w in self.widths:
                self.config(d, w)

    def _check_size(self) -> None:
        """The grid's pairs and cells counted, before one configuration is built."""
        pairs = len(self.depths) * len(self.widths)
        if pairs > MAX_PAIRS:
            raise SweepSpecError(f"{len(self.depths)} depths x {len(self.widths)} widths make {pairs} model "
                                 f"configurations; a sweep holds at most {MAX_PAIRS}")
        cells = pairs * len(self.seeds) * len(self.policies)
        if cells > MAX_CELLS:
            raise SweepSpecError(f"{pairs} configurations x {len(self.seeds)} seeds x {len(self.policies)} "
                                 f"policies make {cells} cells; a sweep holds at most {MAX_CELLS}")

    @property
    def max_step(self) -> int:
        """The last optimizer step any cell reaches."""
        return self.steps[-1]

    def config(self, depth: int, width: int) -> DecoderConfig:
        """The decoder configuration of a (depth, width) cell."""
        key = (depth, width)
        cfg = self._configs.get(key)
        if cfg is None:
            cfg = grid_config(self.vocabulary_size, width, self.head_width, self.ff_ratio, depth,
                              self.sequence_length)
            self._configs[key] = cfg
        return cfg

    def cells(self) -> List[Cell]:
        """Every cell, in grid order (depth, width, seed, policy)."""
        return [Cell(d, w, s, p) for d in self.depths for w in self.widths
                for s in self.seeds for p in self.policies]

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serializable dict; ``SweepSpec.from_dict(spec.to_dict()) == spec``."""
        return spec_fields(self)

    def to_json(self) -> str:
        """The spec as canonical JSON (sorted keys): equal specs give equal text."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepSpec:
        """Builds a spec from :meth:`to_dict` output (or a hand-written JSON object)."""
        return spec_from_dict(cls, d, "sweep spec", ("depths", "widths", "seeds"))

    @classmethod
    def from_json_file(cls, path: str) -> SweepSpec:
        """Reads a spec from a JSON file."""
        return cls.from_dict(read_json(path, "sweep spec", SweepSpecError))

    def replace(self, **changes: Any) -> SweepSpec:
        """A new spec with some fields changed (validated again)."""
        d = self.to_dict()
        unknown = sorted(set(changes) - set(d))
        if unknown:
            raise SweepSpecError(f"unknown sweep spec fields {unknown}")
        d.update({k: v for k, v in changes.items() if v is not None})
        return SweepSpec.from_dict(d)
