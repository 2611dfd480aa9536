"""Turns C-core status codes into pydepth's typed exceptions.

Codes and their identifiers come from the C table (csrc/pd_error.h, read through
``_core.STATUS_CODES``); this module only decides which exception and message each one gets.
"""
from __future__ import annotations

from typing import NoReturn, Optional, Sequence

import numpy as np

from .. import errors as E
from ._core import STATUS_CODES, CoreError, config_check_rule
from ._nodes import GRADIENT, node_name

#: Status code -> identifier ("ERR_TOKEN"), the inverse of the C table.
STATUS_NAMES = {code: ident for ident, code in STATUS_CODES.items()}
ALLOC, TOKEN, TARGET = STATUS_CODES["ERR_ALLOC"], STATUS_CODES["ERR_TOKEN"], STATUS_CODES["ERR_TARGET"]
LOSS_ATTACHED = STATUS_CODES["ERR_LOSS_ATTACHED"]
#: Raised by the Cython skin, not the core: the graph was released (outside the C table).
RELEASED = -1

_XAVIER = {"ERR_ZERO_FAN_IN": "Xavier fan_in must be positive, got 0",
           "ERR_ZERO_FAN_OUT": "Xavier fan_out must be positive, got 0",
           "ERR_FAN_SUM_OVERFLOW": "Xavier fan_in + fan_out overflows 64-bit size arithmetic"}
_INPUT_WHAT = {"ERR_TOKEN": "token id", "ERR_TARGET": "target id", "ERR_EMPTY": "batch",
               "ERR_LAYOUT": "segment layout"}
#: Every status the translation knows; a test checks this covers the whole C table.
HANDLED = frozenset({"ERR_ALLOC", "ERR_OVERFLOW", "ERR_SHAPE_OVERFLOW", *_XAVIER, "ERR_CONFIG",
                     "ERR_ROPE", "ERR_NAME", "ERR_SHAPE", *_INPUT_WHAT, "ERR_NONFINITE",
                     "ERR_ZERO_MEAN_SQUARE", "ERR_STALE", "ERR_NO_LOSS", "ERR_NOT_RECORDED",
                     "ERR_INTERRUPTED", "ERR_LOSS_ATTACHED", "ERR_NO_PENDING"})


def _where(err: CoreError) -> str:
    if err.node < 0:
        return ""
    return f" in {node_name(err.block, err.node)}"


def raise_core(err: CoreError, *, param_names: Sequence[str] = (), token_shape: Sequence[int] = (),
               ids: Optional[np.ndarray] = None, vocabulary_size: int = 0, masked: bool = False) -> NoReturn:
    """Re-raises a CoreError as the typed pydepth error it stands for. ``ids`` is the caller's
    [B, T] array (tokens or targets) a range refusal is about, as the caller gave it, so the
    message shows the exact id; ``masked`` says the batch has padding."""
    s = STATUS_NAMES.get(err.code, "")
    if s in ("ERR_TOKEN", "ERR_TARGET") and ids is not None:
        b, t = divmod(err.index, ids.shape[1])
        where = "valid position" if masked else "position"
        raise E.TokenError(f"{_INPUT_WHAT[s]} {int(ids[b, t])} at {where} [{b}, {t}] is outside "
                           f"[0, {vocabulary_size})") from None
    if err.code == RELEASED:
        raise E.GraphReleasedError("this forward record was released") from None
    if s == "ERR_ALLOC":
        raise E.AllocationError(f"pydepth core could not allocate {err.index} float64 values "
                                f"({err.index * 8} bytes)") from None
    if s in ("ERR_OVERFLOW", "ERR_SHAPE_OVERFLOW"):
        raise E.InitializationError(f"size arithmetic overflowed (index {err.index})") from None
    if s in _XAVIER:
        raise E.InitializationError(_XAVIER[s]) from None
    if s == "ERR_CONFIG":
        rule = config_check_rule(err.index) or f"check {err.index}"
        raise E.ConfigError(f"configuration rejected by the core: {rule} (value {err.value!r})") from None
    if s == "ERR_ROPE":
        raise E.ConfigError(f"the RoPE tables for max_positions x head_width / 2 cannot be built "
                            f"(entry {err.index}, value {err.value!r}); lower max_positions or "
                            "check rope_base") from None
    if s == "ERR_NAME":
        raise E.ParameterNameError(f"invalid parameter name at byte {err.index}") from None
    if s == "ERR_SHAPE":
        raise E.ParameterLayoutError(f"parameter shape mismatch at index {err.index}") from None
    if s in _INPUT_WHAT:
        pos = _position(err.index, token_shape)
        detail = "has no valid position" if s == "ERR_EMPTY" else f"invalid value {err.value:g} at position {pos}"
        raise E.TokenError(f"{_INPUT_WHAT[s]} {detail}") from None
    if s in ("ERR_NONFINITE", "ERR_ZERO_MEAN_SQUARE"):
        reason = ("mean square 0 with rms_epsilon 0" if s == "ERR_ZERO_MEAN_SQUARE"
                  else f"non-finite value {err.value!r}")
        if err.node == GRADIENT and 0 <= err.block < len(param_names):
            where = f" in the gradient of {param_names[err.block]}"
        else:
            where = _where(err)
        raise E.NonFiniteError(f"{reason}{where} at flat index {err.index}") from None
    if s == "ERR_STALE":
        name = param_names[err.index] if err.index < len(param_names) else f"#{err.index}"
        if err.value == 1.0:
            raise E.StaleOperandError(
                f"the values of parameter {name} changed after this graph was recorded without a "
                "revision: something wrote through an alias of its read-only view (for example "
                "torch.from_numpy(p.value)); use NamedParameter.assign") from None
        raise E.StaleOperandError(f"parameter {name} changed after this graph was recorded") from None
    if s == "ERR_NO_LOSS":
        raise E.AutodiffError("backward needs a mean loss attached to this forward record") from None
    if s == "ERR_LOSS_ATTACHED":
        raise E.AutodiffError("this forward record already carries a loss") from None
    if s == "ERR_NO_PENDING":
        raise E.AutodiffError("no reverse pass is waiting to be committed on this graph") from None
    if s == "ERR_NOT_RECORDED":
        raise E.AutodiffError("backward needs a recorded graph; this forward ran with record=False "
                              "or under no_grad()") from None
    if s == "ERR_INTERRUPTED":  # the check stopped without raising (a handler swallowed SIGINT)
        raise E.PydepthError(f"interrupted before block {err.block}") from None
    raise E.PydepthError(f"pydepth core status {err.code} ({s or 'unknown'})") from None


def _position(flat: int, shape: Sequence[int]) -> str:
    if len(shape) == 2 and shape[1]:
        return f"[{flat // shape[1]}, {flat % shape[1]}]"
    return str(flat)
