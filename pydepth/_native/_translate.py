# SPDX-License-Identifier: MIT
"""Turns C-core status codes into pydepth's typed exceptions.

Codes and their identifiers come from the C table (csrc/pd_error.h, read through
``_status.STATUS_CODES``); this module only decides which exception and message each one gets.
"""
from __future__ import annotations

from typing import Callable, Dict, NamedTuple, NoReturn, Optional, Sequence, Tuple, Union

import numpy as np

from .. import errors as E
from ._layout import config_check_rule
from ._status import STATUS_CODES, CoreError
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


class OptimizerCall(NamedTuple):
    """What an optimizer's refused check or step knows, for the message."""

    kind: str                # the optimizer's class name, "AdamW"
    fields: Sequence[str]    # its hyperparameters in the core's order (the index of ERR_CONFIG)
    tensors: Sequence[str]   # its parameters' names (the block of ERR_NONFINITE)
    slots: Sequence[str]     # its slot names (node 1, 2 of ERR_NONFINITE; node 0 is the value)
    step: int                # the step being taken, from 1


class _Context(NamedTuple):
    """What the caller knows about a refused call, for the message."""

    param_names: Sequence[str]
    token_shape: Sequence[int]
    ids: Optional[np.ndarray]
    vocabulary_size: int
    masked: bool
    optimizer: Optional[OptimizerCall] = None


def _where(err: CoreError) -> str:
    if err.node < 0:
        return ""
    return f" in {node_name(err.block, err.node)}"


def _input(s: str, err: CoreError, c: _Context) -> str:
    if s in ("ERR_TOKEN", "ERR_TARGET") and c.ids is not None:  # the caller's array shows the exact id
        b, t = divmod(err.index, c.ids.shape[1])
        where = "valid position" if c.masked else "position"
        return f"{_INPUT_WHAT[s]} {int(c.ids[b, t])} at {where} [{b}, {t}] is outside [0, {c.vocabulary_size})"
    detail = ("has no valid position" if s == "ERR_EMPTY"
              else f"invalid value {err.value:g} at position {_position(err.index, c.token_shape)}")
    return f"{_INPUT_WHAT[s]} {detail}"


def _nonfinite(s: str, err: CoreError, c: _Context) -> str:
    reason = "mean square 0 with rms_epsilon 0" if s == "ERR_ZERO_MEAN_SQUARE" else f"non-finite value {err.value!r}"
    if err.node == GRADIENT and 0 <= err.block < len(c.param_names):
        where = f" in the gradient of {c.param_names[err.block]}"
    else:
        where = _where(err)
    return f"{reason}{where} at flat index {err.index}"


def _stale(s: str, err: CoreError, c: _Context) -> str:
    name = c.param_names[err.index] if err.index < len(c.param_names) else f"#{err.index}"
    if err.value == 1.0:
        return (f"the values of parameter {name} changed after this graph was recorded without a "
                "revision: something wrote through an alias of its read-only view (for example "
                "torch.from_numpy(p.value)); use NamedParameter.assign")
    return f"parameter {name} changed after this graph was recorded"


def _optimizer(c: _Context) -> OptimizerCall:
    assert c.optimizer is not None  # only an _ForOptimizer row calls the messages below
    return c.optimizer


def _hyperparameter(s: str, err: CoreError, c: _Context) -> str:
    o = _optimizer(c)
    field = o.fields[err.index]
    domain = "in [0, 1)" if field.startswith("beta") else "finite and non-negative"
    return f"{o.kind} {field} must be {domain}, got {err.value!r}"


def _update(s: str, err: CoreError, c: _Context) -> str:
    o = _optimizer(c)
    what = ("value", *o.slots)
    return (f"{o.kind} step {o.step} refused: {o.tensors[err.block]} {what[err.node]} "
            f"would become {err.value!r} at flat index {err.index}; nothing was changed")


def _slots(s: str, err: CoreError, c: _Context) -> str:
    return f"{_optimizer(c).kind} slots do not match its parameters (tensor {err.index})"


def _fixed(message: str) -> Callable[[str, CoreError, _Context], str]:
    return lambda s, err, c: message


_Message = Callable[[str, CoreError, _Context], str]


class _ForOptimizer(NamedTuple):
    """The class and message an optimizer's call gets instead, when its refusal ``applies``."""

    kind: type
    message: _Message
    applies: Callable[[CoreError, OptimizerCall], bool] = lambda err, o: True


_Row = Union[Tuple[type, _Message], Tuple[type, _Message, _ForOptimizer]]
#: Status identifier -> (exception class, message[, what an optimizer's call gets instead]): the
#: one place each status is translated.
_TRANSLATIONS: Dict[str, _Row] = {
    "ERR_ALLOC": (E.AllocationError, lambda s, err, c: f"pydepth core could not allocate {err.index} float64 "
                  f"values ({err.index * 8} bytes)"),
    **{k: (E.InitializationError, lambda s, err, c: f"size arithmetic overflowed (index {err.index})")
       for k in ("ERR_OVERFLOW", "ERR_SHAPE_OVERFLOW")},
    **{k: (E.InitializationError, lambda s, err, c: _XAVIER[s]) for k in _XAVIER},
    "ERR_CONFIG": (E.ConfigError, lambda s, err, c: "configuration rejected by the core: "
                   f"{config_check_rule(err.index) or f'check {err.index}'} (value {err.value!r})",
                   _ForOptimizer(E.InvalidHyperparameterError, _hyperparameter,
                                 lambda err, o: err.index < len(o.fields))),
    "ERR_ROPE": (E.ConfigError, lambda s, err, c: "the RoPE tables for max_positions x head_width / 2 cannot "
                 f"be built (entry {err.index}, value {err.value!r}); lower max_positions or check rope_base"),
    "ERR_NAME": (E.ParameterNameError, lambda s, err, c: f"invalid parameter name at byte {err.index}"),
    "ERR_SHAPE": (E.ParameterLayoutError, lambda s, err, c: f"parameter shape mismatch at index {err.index}",
                  _ForOptimizer(E.OptimizerStateError, _slots)),
    **{k: (E.TokenError, _input) for k in _INPUT_WHAT if k != "ERR_LAYOUT"},
    "ERR_LAYOUT": (E.TokenError, _input, _ForOptimizer(E.OptimizerStateError, _slots)),
    "ERR_NONFINITE": (E.NonFiniteError, _nonfinite, _ForOptimizer(E.NonFiniteUpdateError, _update,
                                                                   lambda err, o: 0 <= err.block < len(o.tensors))),
    "ERR_ZERO_MEAN_SQUARE": (E.NonFiniteError, _nonfinite),
    "ERR_STALE": (E.StaleOperandError, _stale),
    "ERR_NO_LOSS": (E.AutodiffError, _fixed("backward needs a mean loss attached to this forward record")),
    "ERR_LOSS_ATTACHED": (E.AutodiffError, _fixed("this forward record already carries a loss")),
    "ERR_NO_PENDING": (E.AutodiffError, _fixed("no reverse pass is waiting to be committed on this graph")),
    "ERR_RECORD_MODE": (E.ArgumentTypeError, lambda s, err, c: f"unknown record mode {err.value!r} "
                        "(0 sites only, 1 every value, 2 what a training step reads)"),
    "ERR_NOT_RECORDED": (E.AutodiffError, _fixed("backward needs a recorded graph; this forward ran with "
                                                 "record=False or under no_grad()")),
    # the check stopped without raising (a handler swallowed SIGINT)
    "ERR_INTERRUPTED": (E.PydepthError, lambda s, err, c: f"interrupted before block {err.block}"
                        if err.block >= 0 else "interrupted before the optimizer update"),
}
#: Every status the translation knows; a test checks this covers the whole C table.
HANDLED = frozenset(_TRANSLATIONS)


def raise_core(err: CoreError, *, param_names: Sequence[str] = (), token_shape: Sequence[int] = (),
               ids: Optional[np.ndarray] = None, vocabulary_size: int = 0, masked: bool = False,
               optimizer: Optional[OptimizerCall] = None) -> NoReturn:
    """Re-raises a CoreError as the typed pydepth error it stands for. ``ids`` is the caller's
    [B, T] array (tokens or targets) a range refusal is about, as the caller gave it, so the
    message shows the exact id; ``masked`` says the batch has padding; ``optimizer`` describes
    the optimizer whose check or step was refused."""
    if err.code == RELEASED:
        raise E.GraphReleasedError("this forward record was released") from None
    s = STATUS_NAMES.get(err.code, "")
    if s not in _TRANSLATIONS:
        raise E.PydepthError(f"pydepth core status {err.code} ({s or 'unknown'})") from None
    c = _Context(param_names, token_shape, ids, vocabulary_size, masked, optimizer)
    kind, message = _row(s, err, c)
    raise kind(message(s, err, c)) from None


def _row(s: str, err: CoreError, c: _Context) -> Tuple[type, _Message]:
    """The class and message of status ``s`` for this caller: an optimizer's own when it applies."""
    kind, message, *instead = _TRANSLATIONS[s]
    if c.optimizer is not None and instead and instead[0].applies(err, c.optimizer):
        return instead[0].kind, instead[0].message
    return kind, message


def _position(flat: int, shape: Sequence[int]) -> str:
    if len(shape) == 2 and shape[1]:
        return f"[{flat // shape[1]}, {flat % shape[1]}]"
    return str(flat)
