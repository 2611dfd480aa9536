"""Turns C-core status codes into pydepth's typed exceptions."""
from __future__ import annotations

from typing import NoReturn, Sequence

from . import errors as E
from ._core import CoreError
from ._nodes import node_name

(OK, ALLOC, OVERFLOW, ZERO_FAN_IN, ZERO_FAN_OUT, FAN_SUM_OVERFLOW, SHAPE_OVERFLOW, CONFIG, NAME,
 SHAPE, TOKEN, TARGET, NONFINITE, ROPE, ZERO_MEAN_SQUARE, EMPTY, LAYOUT, STALE, NO_LOSS) = range(19)


def _where(err: CoreError, shape: Sequence[int] = ()) -> str:
    if err.node < 0:
        return ""
    return f" in {node_name(err.block, err.node)}"


def raise_core(err: CoreError, *, param_names: Sequence[str] = (), token_shape: Sequence[int] = ()) -> NoReturn:
    """Re-raises a CoreError as the typed pydepth error it stands for."""
    c = err.code
    if c == ALLOC:
        raise E.AllocationError(f"pydepth core could not allocate {err.index} elements") from None
    if c in (OVERFLOW, SHAPE_OVERFLOW):
        raise E.InitializationError(f"size arithmetic overflowed (index {err.index})") from None
    if c == ZERO_FAN_IN:
        raise E.InitializationError("Xavier fan_in must be positive, got 0") from None
    if c == ZERO_FAN_OUT:
        raise E.InitializationError("Xavier fan_out must be positive, got 0") from None
    if c == FAN_SUM_OVERFLOW:
        raise E.InitializationError("Xavier fan_in + fan_out overflows 64-bit size arithmetic") from None
    if c in (CONFIG, ROPE):
        raise E.ConfigError(f"configuration rejected by the core (check {err.index}, value {err.value!r})") from None
    if c == NAME:
        raise E.ParameterNameError(f"invalid parameter name at byte {err.index}") from None
    if c == SHAPE:
        raise E.ParameterLayoutError(f"parameter shape mismatch at index {err.index}") from None
    if c in (TOKEN, TARGET, EMPTY, LAYOUT):
        what = {TOKEN: "token id", TARGET: "target id", EMPTY: "batch", LAYOUT: "segment layout"}[c]
        pos = _position(err.index, token_shape)
        detail = "has no valid position" if c == EMPTY else f"invalid value {err.value:g} at position {pos}"
        raise E.TokenError(f"{what} {detail}") from None
    if c in (NONFINITE, ZERO_MEAN_SQUARE):
        reason = "mean square 0 with rms_epsilon 0" if c == ZERO_MEAN_SQUARE else f"non-finite value {err.value!r}"
        if err.node == 40 and 0 <= err.block < len(param_names):
            where = f" in the gradient of {param_names[err.block]}"
        else:
            where = _where(err)
        raise E.NonFiniteError(f"{reason}{where} at flat index {err.index}") from None
    if c == STALE:
        name = param_names[err.index] if err.index < len(param_names) else f"#{err.index}"
        raise E.StaleOperandError(f"parameter {name} changed after this graph was recorded") from None
    if c == NO_LOSS:
        raise E.AutodiffError("backward needs a recorded graph with a mean loss attached") from None
    raise E.PydepthError(f"pydepth core status {c}") from None


def _position(flat: int, shape: Sequence[int]) -> str:
    if len(shape) == 2 and shape[1]:
        return f"[{flat // shape[1]}, {flat % shape[1]}]"
    return str(flat)
