# SPDX-License-Identifier: MIT
"""Residual health: activation RMS and completed mean-loss adjoint RMS at every residual site
(chapter 6; formulas in docs/numerics.md §9).

Site 0 is the input residual (embedding output); site ``2b+1`` is the state after block ``b``'s
attention addition and site ``2b+2`` the state after its feed-forward addition. Activation RMS
is divided by the input RMS ``A_0`` and adjoint RMS by the terminal residual-adjoint RMS
``G_{2L}``; both normalizers must be positive and finite (no epsilon repair). Only valid
positions enter any arithmetic. Ratios are classified in an inclusive band, by default the
chapter's ``HEALTH_BAND`` ``[0.01, 100]``; the band used is recorded in the report.

The work is split in three: checks of the caller's objects (:func:`observe_residual_health`),
RMS over valid positions (:func:`valid_feature_rms`) and report building
(:func:`health_report_from_sites` / :func:`health_report_from_rms`), which other observers (the
PyTorch bridge) call with site activations and adjoints they computed themselves.
"""
from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ._checks import plain_array
from ._fields import as_dict, quantity, table_cells, table_header
from .errors import (ArgumentTypeError, EmptyValidityError, InvalidBandError, InvalidGeometryError,
                     InvalidNormalizerError, MissingAdjointError, ModelForwardMismatchError, NonFiniteValueError)
from ._native import _health
from .model import DecoderModel, ForwardRecord, GraphValue

__all__ = ["HEALTH_BAND", "RatioBand", "check_band", "classify_ratio", "ResidualHealthRow",
           "BranchHealthRow", "DepthHealthReport", "observe_residual_health",
           "health_report_from_sites", "health_report_from_rms", "valid_feature_rms", "valid_feature_rms_many",
           "SquareSums", "square_sums", "site_label", "site_table"]

#: A band argument: ``None`` for the chapter's :data:`HEALTH_BAND`, else ``(low, high)``.
BandLike = Optional[Sequence[float]]

#: The inclusive band [low, high] of dimensionless residual ratios counted as healthy.
HEALTH_BAND: Tuple[float, float] = (0.01, 100.0)

_DBL_MAX = np.finfo(np.float64).max
_SMALLEST_SAFE = 2.0 ** -511  # squares of magnitudes at least this large are normal numbers


class RatioBand(enum.Enum):
    """Where a ratio lies relative to an inclusive band (by default :data:`HEALTH_BAND`)."""

    WITHIN = "within"
    BELOW = "below"
    ABOVE = "above"


def check_band(band: BandLike = None) -> Tuple[float, float]:
    """The band as ``(low, high)`` floats: ``None`` gives the chapter's :data:`HEALTH_BAND`
    (read at call time); otherwise two finite real numbers with ``0 <= low <= high``, else
    :class:`InvalidBandError` naming the value."""
    if band is None:
        band = HEALTH_BAND
    if isinstance(band, (str, bytes)) or (not isinstance(band, Sequence) and not isinstance(band, np.ndarray)):
        raise InvalidBandError(f"band must be a pair (low, high), got {band!r}")
    if len(band) != 2:
        raise InvalidBandError(f"band must be a pair (low, high), got {len(band)} values: {band!r}")
    for edge in band:
        if isinstance(edge, bool) or not isinstance(edge, numbers.Real):
            raise InvalidBandError(f"band edges must be real numbers, got {edge!r} in {band!r}")
    low, high = float(band[0]), float(band[1])
    if not (math.isfinite(low) and math.isfinite(high)):
        raise InvalidBandError(f"band edges must be finite, got ({low!r}, {high!r})")
    if not 0.0 <= low <= high:
        raise InvalidBandError(f"band must satisfy 0 <= low <= high, got ({low!r}, {high!r})")
    return low, high


def classify_ratio(x: float, band: BandLike = None) -> RatioBand:
    """Classifies an unrounded ratio against the inclusive ``band`` (default the chapter's
    ``[0.01, 100]``): ``BELOW`` if ``x < low``, ``ABOVE`` if ``x > high``, else ``WITHIN``
    (both endpoints included). Non-finite ratios raise :class:`NonFiniteValueError`; a bad
    band raises :class:`InvalidBandError`."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ArgumentTypeError(f"ratio must be a real number, got {x!r}")
    low, high = check_band(band)
    v = float(x)
    if not math.isfinite(v):
        raise NonFiniteValueError(f"cannot classify non-finite ratio {v!r}")
    if v < low:
        return RatioBand.BELOW
    if v > high:
        return RatioBand.ABOVE
    return RatioBand.WITHIN


def sequential_sum(values: np.ndarray) -> float:
    """Left-to-right sum starting at 0.0 (np.add.accumulate is strictly sequential, unlike the
    pairwise summation of np.sum)."""
    if values.size == 0:
        return 0.0
    return float(np.add.accumulate(values)[-1]) + 0.0


def valid_feature_rms(values: Any, valid: Any, *, what: str = "value") -> float:
    """RMS over the features of the valid positions of ``values`` ``[B, T, ...]``.

    Invalid positions are dropped by selection before any arithmetic, so NaN or infinity there
    never reaches the result. Non-finite valid values raise :class:`NonFiniteValueError`. When
    no square can overflow or underflow the result is the reference's ``sqrt(sum(x*x)/n)``
    summed sequentially in row-major order; otherwise the values are first divided by their
    largest magnitude."""
    return valid_feature_rms_many([values], valid, what=[what])[0]


def valid_feature_rms_many(values: Sequence[Any], valid: Any, *, what: Sequence[str],
                           scale: float = 1.0) -> List[float]:
    """:func:`valid_feature_rms` of each array of ``values`` (one validity mask for all), named
    ``what[i]`` in errors; each value is first multiplied by ``scale`` in float64 (one rounding;
    1.0 leaves it unchanged). float32 and float64 arrays are read in place: the sums of squares
    run in the core, several arrays side by side, each still one sequential sum; an array with a
    value whose square could overflow or underflow (or a non-finite one) takes the scaled path."""
    sums = square_sums(values, valid, what=what, scale=scale)
    out = []
    for i, total in enumerate(sums.sums):
        if total is None:  # out of range, non-finite or featureless: the checked float64 path decides or refuses
            out.append(_scaled_rms(sums.scaled(i), sums.mask, sums.names[i]))
        else:
            out.append(math.sqrt(total / float(sums.counts[i])))
    return out


@dataclass(frozen=True)
class SquareSums:
    """The sums of squares behind :func:`valid_feature_rms_many`: per array the sequential sum of
    ``(x * scale)**2`` over the valid positions' features (``None`` when a value is non-finite
    or its square could overflow or underflow: the scaled path decides) and the count of values;
    ``rows`` are the arrays as ``[positions, features]``, read in place."""

    mask: np.ndarray
    names: List[str]
    rows: List[np.ndarray]
    counts: List[int]
    sums: List[Optional[float]]
    scale: float

    def scaled(self, i: int) -> np.ndarray:
        """Array ``i`` as float64 rows times the scale (an overflow becomes infinity)."""
        rows: np.ndarray = self.rows[i].astype(np.float64)
        if self.scale != 1.0:
            with np.errstate(over="ignore", under="ignore"):  # an overflow is refused as non-finite later
                rows = rows * self.scale
        return rows


def square_sums(values: Sequence[Any], valid: Any, *, what: Sequence[str], scale: float = 1.0) -> SquareSums:
    """Checks ``values`` and ``valid`` as :func:`valid_feature_rms` does and sums each array's
    squares in the core (see :class:`SquareSums`)."""
    names = list(what)
    if len(names) != len(values):
        raise InvalidGeometryError(f"{len(values)} arrays and {len(names)} names")
    mask = plain_array("validity mask", valid, InvalidGeometryError)
    wide = [_values(v, name) for v, name in zip(values, names)]
    if mask.dtype != np.bool_:
        raise InvalidGeometryError(f"validity mask must be boolean, got dtype {mask.dtype}")
    arrays = [_feature_rows(arr, mask, name) for arr, name in zip(wide, names)]
    if not mask.any():
        raise EmptyValidityError(f"the validity mask {mask.shape} selects no position")
    kept = int(mask.sum())
    flat_mask = np.ascontiguousarray(mask.reshape(-1))
    results: List[Optional[float]] = [None] * len(arrays)
    for features in sorted({a.shape[1] for a in arrays}):
        group = [i for i, a in enumerate(arrays) if a.shape[1] == features]
        n = kept * features
        if n == 0:
            continue  # refused by the scaled path, in order, with the name
        limit = float(math.sqrt(_DBL_MAX / n))
        sums = _health.sums_of_squares([arrays[i] for i in group], [scale] * len(group), flat_mask, limit)
        for i, (total, in_range) in zip(group, sums):
            if in_range:
                results[i] = total + 0.0
    return SquareSums(mask, names, arrays, [kept * a.shape[1] for a in arrays], results, float(scale))


def _values(values: Any, what: str) -> np.ndarray:
    """float32 and float64 ndarrays as they are (read in place), anything else converted to
    float64 exactly (masked arrays and ragged sequences refused)."""
    if type(values) is np.ndarray and values.dtype in (np.float32, np.float64):
        return values
    return plain_array(what, values, InvalidGeometryError, dtype=np.float64)


def _feature_rows(arr: np.ndarray, mask: np.ndarray, what: str) -> np.ndarray:
    """``arr`` as C-contiguous ``[positions, features]`` rows (no copy when it is contiguous)."""
    if arr.ndim < mask.ndim or arr.shape[:mask.ndim] != mask.shape:
        raise InvalidGeometryError(f"{what} has shape {arr.shape}; validity mask {mask.shape} "
                                   "must match its leading dimensions")
    return np.ascontiguousarray(arr.reshape(mask.size, -1) if arr.size else arr.reshape(mask.size, 0))


def _scaled_rms(flat_rows: np.ndarray, mask: np.ndarray, what: str) -> float:
    """The RMS of float64 rows ``[positions, features]`` in numpy: refuses non-finite values,
    and divides by the largest magnitude first when a square could overflow or underflow."""
    rows = flat_rows[mask.reshape(-1)]  # boolean selection: copies valid positions only, no arithmetic
    flat = rows.reshape(-1)
    n = flat.size
    hi, lo = (float(flat.max()), float(flat.min())) if n else (0.0, 0.0)  # NaN and infinity reach both
    if not (math.isfinite(hi) and math.isfinite(lo)):
        finite = np.isfinite(flat)
        where = np.argwhere(mask)[int(np.flatnonzero(~finite)[0]) // max(1, rows[0].size)]
        bad = float(flat[~finite][0])
        raise NonFiniteValueError(
            f"{what} holds non-finite value {bad!r} at valid position {tuple(int(i) for i in where)}")
    if n == 0:
        raise InvalidGeometryError(f"{what} has no features at the valid positions")
    largest = max(hi, -lo)
    if largest == 0.0:
        return 0.0
    if largest <= math.sqrt(_DBL_MAX / n):
        with np.errstate(under="ignore"):  # an underflowing square only sends us to the exact path below
            squares = flat * flat
        # |x| >= 2**-511 exactly when x*x >= 2**-1022: no square is subnormal and none is zero
        if float(squares.min()) >= _SMALLEST_SAFE * _SMALLEST_SAFE:
            return math.sqrt(sequential_sum(squares) / float(n))
    magnitudes = np.abs(flat)
    nonzero = magnitudes[magnitudes != 0.0]
    smallest = float(nonzero.min())
    if smallest >= _SMALLEST_SAFE and largest <= math.sqrt(_DBL_MAX / n):
        return math.sqrt(sequential_sum(flat * flat) / float(n))
    with np.errstate(under="ignore"):  # tiny scaled squares may round to zero harmlessly
        scaled = flat / largest
        squares = scaled * scaled
    return largest * math.sqrt(sequential_sum(squares) / float(n))


def site_label(site: int) -> str:
    """``input`` for site 0, ``block.{b}.after_attention`` for site 2b+1 and
    ``block.{b}.after_feed_forward`` for site 2b+2."""
    if site == 0:
        return "input"
    if site % 2 == 1:
        return f"block.{site // 2}.after_attention"
    return f"block.{site // 2 - 1}.after_feed_forward"


_RATIO = "1 (a ratio)"
_RESIDUAL = "the residual's unit"
_ADJOINT = "nats per residual unit"


@dataclass(frozen=True)
class ResidualHealthRow:
    """One residual site: absolute RMS values, their ratios to the normalizers and the ratios'
    band classification. Each field declares its name in sweep rows and logged metrics, its unit
    and its printed heading (:mod:`pydepth._fields`); the fields' order is the sweep's column order."""

    site: int = quantity("the site: 0 the input residual, 2b+1 after block b's attention addition, "
                         "2b+2 after its feed-forward addition", heading="site")
    label: str = quantity("the site's name: `input`, `block.3.after_attention`, `block.3.after_feed_forward` "
                          "or `block.3.parallel_residual.output`", column="site_label", heading="stage")
    activation_ratio: float = quantity("activation RMS ratio `A_s / A_0`", unit=_RATIO, heading="A_s/A_0",
                                       fmt=".4g", metric=True)
    adjoint_ratio: float = quantity("adjoint RMS ratio `G_s / G_2L`", unit=_RATIO, heading="G_s/G_2L",
                                    fmt=".4g", metric=True)
    activation_rms: float = quantity("activation RMS `A_s` over the valid positions' features", unit=_RESIDUAL,
                                     heading="A_s", fmt=".4g", metric=True)
    adjoint_rms: float = quantity("RMS `G_s` of the completed mean-loss adjoint over the valid positions' "
                                  "features", unit=_ADJOINT, heading="G_s", fmt=".4g", metric=True)
    activation_status: RatioBand = quantity("where `A_s / A_0` lies against the band: `within`, `below` or "
                                            "`above`", heading="A class")
    adjoint_status: RatioBand = quantity("where `G_s / G_2L` lies against the band: `within`, `below` or "
                                         "`above`", heading="G class")

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form (statuses as their string values), keyed by field name."""
        return as_dict(self)


@dataclass(frozen=True)
class BranchHealthRow:
    """Branch-output RMS and the two norm gains of one block (outside the ratio band)."""

    block: int = quantity("the block")
    attention_output_rms: float = quantity("RMS of the attention branch's output over the valid positions",
                                           unit=_RESIDUAL)
    feed_forward_output_rms: float = quantity("RMS of the feed-forward branch's output over the valid positions",
                                              unit=_RESIDUAL)
    attention_norm_gain: Tuple[float, ...] = quantity("the attention norm's gain vector")
    feed_forward_norm_gain: Tuple[float, ...] = quantity("the feed-forward norm's gain vector")

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form, keyed by field name."""
        return as_dict(self)


def _no_renderer(report: DepthHealthReport) -> str:
    raise RuntimeError("pydepth.health.html_renderer is unset: import pydepth, whose __init__ sets it")


#: The notebook HTML of a :class:`DepthHealthReport`, set by ``pydepth/__init__.py`` to the report
#: package's renderer: that package imports this module, so this one cannot import it.
html_renderer: List[Callable[[DepthHealthReport], str]] = [_no_renderer]


@dataclass(frozen=True)
class DepthHealthReport:
    """Residual health of one decoder on one forward pass and its mean loss; ``band`` is the
    inclusive band the statuses were classified against."""

    valid_positions: int = quantity("positions that entered the RMS")
    width: int = quantity("features per position")
    input_activation_normalizer: float = quantity("input activation RMS `A_0`", unit=_RESIDUAL)
    terminal_adjoint_normalizer: float = quantity("terminal residual-adjoint RMS `G_2L`", unit=_ADJOINT)
    sites: Tuple[ResidualHealthRow, ...] = quantity("one row per residual site")
    branches: Tuple[BranchHealthRow, ...] = quantity("one row per block")
    final_norm_gain: Tuple[float, ...] = quantity("the final norm's gain vector")
    band: Tuple[float, float] = quantity("the inclusive band the ratios were classified in", unit=_RATIO,
                                         default=HEALTH_BAND)

    @property
    def within_band(self) -> bool:
        """Whether every site's activation and adjoint ratio lies within the band."""
        return all(r.activation_status is RatioBand.WITHIN and r.adjoint_status is RatioBand.WITHIN
                   for r in self.sites)

    @property
    def activation_ratio_range(self) -> Tuple[float, float]:
        """(minimum, maximum) activation ratio over the sites."""
        values = [r.activation_ratio for r in self.sites]
        return min(values), max(values)

    @property
    def adjoint_ratio_range(self) -> Tuple[float, float]:
        """(minimum, maximum) adjoint ratio over the sites."""
        values = [r.adjoint_ratio for r in self.sites]
        return min(values), max(values)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form: every field by its name, then the ratio ranges and ``within_band``."""
        a_min, a_max = self.activation_ratio_range
        g_min, g_max = self.adjoint_ratio_range
        return {**as_dict(self), "activation_ratio_min": a_min, "activation_ratio_max": a_max,
                "adjoint_ratio_min": g_min, "adjoint_ratio_max": g_max, "within_band": self.within_band}

    def verdict(self) -> str:
        """One line: within the band or not, where, and by how much (the worst ratio outside it)."""
        return verdict_line([r.to_dict() for r in self.sites], self.band)

    def _repr_html_(self) -> str:
        """The report as a notebook shows it: the verdict, the sites' table and, with
        matplotlib installed, the ratio figure as inline SVG (:data:`html_renderer`)."""
        return html_renderer[0](self)

    def to_table(self, title: Optional[str] = None) -> str:
        """A plain-text table for people: the verdict first, the legend, then the sites (four
        significant digits; classification uses unrounded ratios)."""
        lines = [self.verdict(), LEGEND]
        if title:
            lines.append(title)
        lines.append(f"valid positions {self.valid_positions}, width {self.width}, band "
                     f"[{self.band[0]:g}, {self.band[1]:g}] inclusive")
        lines.append(f"input activation RMS normalizer A_0: {self.input_activation_normalizer:.4g}")
        lines.append(f"terminal residual-adjoint RMS normalizer G_2L: {self.terminal_adjoint_normalizer:.4g}")
        lines.extend(site_table([r.to_dict() for r in self.sites]))
        lines.append("all site ratios within band" if self.within_band
                     else "SOME SITE RATIOS OUTSIDE THE BAND")
        return "\n".join(lines)


#: The one line that defines the printed ratios and the band.
LEGEND = ("legend: A_s/A_0 = activation RMS at residual site s over the input's; G_s/G_2L = mean-loss "
          "adjoint RMS at site s over the final residual's; the band is the inclusive range a healthy ratio "
          "stays in")


def verdict_line(sites: Sequence[Mapping[str, Any]], band: Sequence[float]) -> str:
    """The verdict of site rows (:meth:`ResidualHealthRow.to_dict` form) classified in ``band``: within
    it or not, at how many sites, and the worst ratio outside it, where and by what factor."""
    lo, hi = float(band[0]), float(band[1])
    shown = f"[{lo:g}, {hi:g}]"
    outside = [(r, heading, r[ratio]) for r in sites
               for heading, ratio, status in (("A_s/A_0", "activation_ratio", "activation_status"),
                                              ("G_s/G_2L", "adjoint_ratio", "adjoint_status"))
               if RatioBand(r[status]) is not RatioBand.WITHIN]
    if not outside:
        acts, adjs = [r["activation_ratio"] for r in sites], [r["adjoint_ratio"] for r in sites]
        return (f"verdict: every site within the band {shown}: A_s/A_0 {min(acts):.3g} to {max(acts):.3g}, "
                f"G_s/G_2L {min(adjs):.3g} to {max(adjs):.3g}")
    row, heading, ratio = max(outside, key=lambda o: _distance(o[2], (lo, hi)))
    edge = lo if ratio < lo else hi
    count = len({o[0]["site"] for o in outside})
    return (f"verdict: OUTSIDE the band {shown} at {count} of {len(sites)} sites; worst {heading} "
            f"{ratio:.3g} at {row['label']} (site {row['site']}), {_times(ratio, edge)} the edge {edge:g}")


def _distance(ratio: float, band: Tuple[float, float]) -> float:
    """How far outside the band a ratio lies, as a factor (0 inside; infinite for a zero ratio)."""
    if ratio < band[0]:
        return math.inf if ratio <= 0.0 else band[0] / ratio
    return ratio / band[1] if ratio > band[1] else 0.0


def _times(ratio: float, edge: float) -> str:
    """``'1.4e+03x below'`` or ``'3.1x above'``."""
    if ratio < edge:
        return "infinitely below" if ratio <= 0.0 else f"{edge / ratio:.3g}x below"
    return "infinitely above" if edge <= 0.0 else f"{ratio / edge:.3g}x above"


def site_table(sites: Sequence[Mapping[str, Any]]) -> List[str]:
    """The site rows (each in :meth:`ResidualHealthRow.to_dict` form) as text lines: one column
    per field of :class:`ResidualHealthRow` that declares a heading."""
    return format_table(table_header(ResidualHealthRow), [table_cells(ResidualHealthRow, r) for r in sites])


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    """Left-aligned text columns (first two) and right-aligned numbers (the rest)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def fmt(cells: Sequence[str]) -> str:
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            out.append(str(c).ljust(w) if i < 2 else str(c).rjust(w))
        return "  ".join(out).rstrip()

    return [fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]


def _gain(model: DecoderModel, name: str) -> Tuple[float, ...]:
    return tuple(float(v) for v in model.parameter(name).value)


def _positive_normalizer(value: float, name: str) -> float:
    if not (math.isfinite(value) and value > 0.0):
        raise InvalidNormalizerError(f"{name} is {value!r}; a ratio normalizer must be positive and finite")
    return value


_A0 = "input activation RMS A_0"
_G2L = "terminal residual-adjoint RMS G_2L"


def _finite_ratio(site: int, label: str, what: str, rms: float, normalizer: float, ratio: float) -> None:
    """Refuses a ratio that overflowed (finite RMS over a tiny normalizer), naming site and field."""
    if not math.isfinite(ratio):
        raise NonFiniteValueError(f"site {site} ({label}) {what} ratio {rms!r} / {normalizer!r} is {ratio!r}; "
                                  "the RMS values span more than float64 can divide")


def health_report_from_rms(activation_rms: Sequence[float], adjoint_rms: Sequence[float], *,
                           valid_positions: int, width: int, band: BandLike = None,
                           labels: Optional[Sequence[str]] = None,
                           branches: Sequence[BranchHealthRow] = (),
                           final_norm_gain: Sequence[float] = ()) -> DepthHealthReport:
    """Builds a report from per-site RMS values (site 0 the input, the last site the terminal
    residual): ratios to ``A_0`` and ``G_2L``, classified in ``band`` (default the chapter's).

    ``labels`` name the sites (default :func:`site_label`, the 2L+1 layout of a sequential
    decoder; a parallel-residual model passes its own L+1 labels). Raises
    :class:`InvalidNormalizerError` when a normalizer is not positive and finite,
    :class:`NonFiniteValueError` for a non-finite RMS and :class:`InvalidGeometryError` when
    lengths disagree."""
    low_high = check_band(band)
    acts = [float(a) for a in activation_rms]
    grads = [float(g) for g in adjoint_rms]
    if not acts or len(acts) != len(grads):
        raise InvalidGeometryError(f"{len(acts)} activation RMS values and {len(grads)} adjoint RMS "
                                   "values: need the same positive number of sites")
    names = [site_label(i) for i in range(len(acts))] if labels is None else [str(x) for x in labels]
    if len(names) != len(acts):
        raise InvalidGeometryError(f"{len(names)} labels for {len(acts)} sites")
    for what, values in (("activation", acts), ("adjoint", grads)):
        bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
        if bad:
            raise NonFiniteValueError(f"site {bad[0]} {what} RMS is {values[bad[0]]!r}")
    a0 = _positive_normalizer(acts[0], _A0)
    g_last = _positive_normalizer(grads[-1], _G2L)
    rows = []
    for i, (a, g) in enumerate(zip(acts, grads)):
        ar, gr = a / a0, g / g_last
        _finite_ratio(i, names[i], "activation", a, a0, ar)
        _finite_ratio(i, names[i], "adjoint", g, g_last, gr)
        rows.append(ResidualHealthRow(site=i, label=names[i], activation_rms=a, adjoint_rms=g,
                                      activation_ratio=ar, adjoint_ratio=gr,
                                      activation_status=classify_ratio(ar, low_high),
                                      adjoint_status=classify_ratio(gr, low_high)))
    return DepthHealthReport(valid_positions=int(valid_positions), width=int(width),
                             input_activation_normalizer=a0, terminal_adjoint_normalizer=g_last,
                             sites=tuple(rows), branches=tuple(branches),
                             final_norm_gain=tuple(float(v) for v in final_norm_gain), band=low_high)


def health_report_from_sites(activations: Sequence[Any], adjoints: Sequence[Any], valid: Any = None, *,
                             band: BandLike = None, labels: Optional[Sequence[str]] = None,
                             branches: Sequence[BranchHealthRow] = (),
                             final_norm_gain: Sequence[float] = (), adjoint_scale: float = 1.0) -> DepthHealthReport:
    """Builds a report from site activations and their completed adjoints (each ``[B, T, D]``
    array-like, site 0 the input residual) over the positions ``valid`` (bool ``[B, T]``; default
    every position) selects: the same RMS arithmetic and classification as
    :func:`observe_residual_health`. Each adjoint value is multiplied by ``adjoint_scale`` in
    float64 (one rounding) before its RMS: an observer reading adjoints of a scaled objective
    passes the factor that unscales them instead of a scaled float64 copy.

    For observers that run their own forward and reverse pass (the PyTorch bridge); see
    :func:`health_report_from_rms` for ``labels``, ``branches`` and the errors."""
    acts = list(activations)
    grads = list(adjoints)
    if not acts or len(acts) != len(grads):
        raise InvalidGeometryError(f"{len(acts)} site activations and {len(grads)} adjoints: "
                                   "need the same positive number of sites")
    shapes = [np.shape(a) for a in acts]
    if len(shapes[0]) < 3:
        raise InvalidGeometryError(f"site 0 has shape {shapes[0]}; sites are [batch, tokens, features]")
    mask = (np.ones(shapes[0][:2], dtype=bool) if valid is None
            else plain_array("validity mask", valid, InvalidGeometryError))
    for i, (shape, g) in enumerate(zip(shapes, grads)):
        if shape != shapes[0]:
            raise InvalidGeometryError(f"site {i} has shape {shape}; site 0 has {shapes[0]}")
        if np.shape(g) != shape:
            raise InvalidGeometryError(f"site {i} adjoint shape {np.shape(g)} differs from the site's {shape}")
    activation_rms = valid_feature_rms_many(acts, mask, what=[f"site {i}" for i in range(len(acts))])
    _positive_normalizer(activation_rms[0], _A0)
    adjoint_rms = valid_feature_rms_many(grads, mask, what=[f"adjoint of site {i}" for i in range(len(grads))],
                                         scale=adjoint_scale)
    return health_report_from_rms(activation_rms, adjoint_rms, valid_positions=int(mask.sum()),
                                  width=int(shapes[0][-1]), band=band,
                                  labels=labels, branches=branches, final_norm_gain=final_norm_gain)


def _observed_mask(model: DecoderModel, fwd: ForwardRecord, loss: GraphValue, valid: Optional[Any]) -> np.ndarray:
    """Every check of the caller's objects that needs no adjoint; returns the validity mask."""
    if not isinstance(model, DecoderModel):
        raise ArgumentTypeError(f"model must be a DecoderModel, got {type(model).__name__}")
    if not isinstance(fwd, ForwardRecord):
        raise ArgumentTypeError(f"fwd must be a ForwardRecord, got {type(fwd).__name__}")
    if not isinstance(loss, GraphValue):
        raise ArgumentTypeError(f"loss must be a GraphValue, got {type(loss).__name__}")
    cfg = model.config
    embedding_shape = fwd.embedding.shape
    if (fwd.model is not model or len(fwd.blocks) != cfg.layers
            or embedding_shape is None or embedding_shape[-1] != cfg.model_width):
        raise ModelForwardMismatchError(
            f"the forward record ({len(fwd.blocks)} blocks, embedding shape {embedding_shape}) was not "
            f"produced by this model ({cfg.layers} blocks, width {cfg.model_width})")
    if valid is None:
        mask = np.asarray(fwd.valid)
    else:
        mask = plain_array("validity mask", valid, InvalidGeometryError)
        if mask.dtype != np.bool_:
            raise InvalidGeometryError(f"validity mask must be boolean, got dtype {mask.dtype}")
    if mask.shape != tuple(fwd.token_shape):
        raise InvalidGeometryError(
            f"validity mask has shape {mask.shape}; the forward record's tokens have shape {tuple(fwd.token_shape)}")
    if not mask.any():
        raise EmptyValidityError(f"the validity mask {mask.shape} selects no position")
    padded = mask & ~np.asarray(fwd.valid)
    if padded.any():
        b, t = (int(i) for i in np.argwhere(padded)[0])
        raise InvalidGeometryError(f"position [{b}, {t}] is padding in the forward record and cannot be observed")
    if loss.record is not fwd or not fwd.recorded:
        raise MissingAdjointError(
            "site 0 (input) has no completed adjoint: the loss was not recorded on this forward record")
    return mask


def observe_residual_health(model: DecoderModel, fwd: ForwardRecord, loss: GraphValue,
                            valid: Optional[Any] = None, *, band: BandLike = None,
                            accumulate_gradients: bool = False) -> DepthHealthReport:
    """Observes residual activation RMS and completed mean-loss adjoint RMS at all 2L+1 sites.

    ``fwd`` must come from ``model`` and ``loss`` must be the mean loss attached to ``fwd``;
    ``valid`` (bool ``[B, T]``, default ``fwd.valid``) selects the positions observed and may
    not include padding. ``band`` (default the chapter's ``[0.01, 100]``) is the inclusive band
    the ratios are classified in; the report records it.

    Gradients (the same rule as :func:`pydepth.torch.observe_residual_health`): the observer
    runs exactly one ordinary reverse pass of ``loss``. By default every parameter's ``.grad``
    is left as it was; with ``accumulate_gradients=True`` the pass also accumulates parameter
    gradients exactly as ``loss.backward()`` would (a training step that observes on its own
    reverse pass), so do not call ``loss.backward()`` again for the same step. The pass's
    contribution is committed only after every check (G_2L included) passed, so a refusal never
    changes a gradient. It adds no graph operation, random draw or weight change. Every
    check that needs no adjoint runs before the reverse pass."""
    if not isinstance(accumulate_gradients, bool):
        raise ArgumentTypeError(f"accumulate_gradients must be a bool, got {accumulate_gradients!r}")
    low_high = check_band(band)
    mask = _observed_mask(model, fwd, loss, valid)
    sites = list(fwd.residual_sites)
    activations = [valid_feature_rms(s.value, mask, what=s.name) for s in sites]
    branch_rms = [(valid_feature_rms(blk.attention_output.value, mask, what=blk.attention_output.name),
                   valid_feature_rms(blk.feed_forward_output.value, mask, what=blk.feed_forward_output.name))
                  for blk in fwd.blocks]
    _positive_normalizer(activations[0], _A0)
    reports: List[DepthHealthReport] = []

    def decide(adjoints: List[Optional[np.ndarray]]) -> bool:
        """Every check on the site adjoints, run while the pass waits: a refusal (a missing
        adjoint, G_2L = 0, ...) drops the pass and leaves every gradient as it was."""
        gradients = []
        for i, (site, adjoint) in enumerate(zip(sites, adjoints)):
            if adjoint is None:
                raise MissingAdjointError(f"site {i} ({site_label(i)}, {site.name}) has no completed adjoint")
            if tuple(adjoint.shape) != site.shape:
                raise InvalidGeometryError(f"site {i} adjoint shape {adjoint.shape} differs from "
                                           f"the site's {site.shape}")
            gradients.append(valid_feature_rms(adjoint, mask, what=f"adjoint of site {i}"))
        branches = tuple(
            BranchHealthRow(block=b, attention_output_rms=att, feed_forward_output_rms=ffn,
                            attention_norm_gain=_gain(model, f"blocks.{b}.attention_norm.gain"),
                            feed_forward_norm_gain=_gain(model, f"blocks.{b}.ffn_norm.gain"))
            for b, (att, ffn) in enumerate(branch_rms))
        reports.append(health_report_from_rms(activations, gradients, valid_positions=int(mask.sum()),
                                              width=model.config.model_width, band=low_high,
                                              branches=branches, final_norm_gain=_gain(model, "final_norm.gain")))
        return accumulate_gradients

    loss._reverse(sites, commit=False, decide=decide)
    return reports[0]
