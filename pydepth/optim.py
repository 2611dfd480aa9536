# SPDX-License-Identifier: MIT
"""Optimizers over a model's parameters (SGD, AdamW) stepping in the C core, and learning-rate
schedules as plain callables of the step. The per-element arithmetic is docs/numerics-optimizers.md."""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Dict, Iterable, Mapping, NoReturn, Optional, Tuple, Union

import numpy as np

from ._native import _graph, _optim, _translate
from ._native._status import CoreError
from . import elementary
from ._checks import as_int, as_real
from .threads import InTurn
from .errors import ArgumentTypeError, InvalidHyperparameterError, OptimizerStateError, UnknownNameError
from .model import NamedParameter

Schedule = Callable[[int], float]
LearningRate = Union[float, Schedule]

#: Most updates an optimizer counts: the bias correction uses the step as an exact float64.
MAX_STEP = 2**53

__all__ = ["MAX_STEP", "Optimizer", "SGD", "AdamW", "WarmupCosine", "warmup_cosine", "schedule_from_dict"]


def _real(name: str, value: Any) -> float:
    return as_real(name, value, InvalidHyperparameterError)


def _count(name: str, value: Any) -> int:
    return as_int(name, value, InvalidHyperparameterError)


class WarmupCosine:
    """Learning rate of the step with `step` updates already taken: linear warmup
    peak_lr*(step+1)/warmup_steps for step < warmup_steps, then a half cosine from peak_lr down to
    min_lr at total_steps, and min_lr after that. The cosine is pydepth.elementary.cos, so the rates
    are the same bits on every platform (docs/numerics-optimizers.md)."""

    def __init__(self, peak_lr: float, *, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> None:
        self.peak_lr = _real("peak_lr", peak_lr)
        self.min_lr = _real("min_lr", min_lr)
        self.warmup_steps = _count("warmup_steps", warmup_steps)
        self.total_steps = _count("total_steps", total_steps)
        if not math.isfinite(self.peak_lr) or self.peak_lr < 0.0:
            raise InvalidHyperparameterError(f"peak_lr must be finite and non-negative, got {self.peak_lr!r}")
        if not (math.isfinite(self.min_lr) and 0.0 <= self.min_lr <= self.peak_lr):
            raise InvalidHyperparameterError(f"min_lr must lie in [0, peak_lr={self.peak_lr!r}], got {self.min_lr!r}")
        if self.total_steps < self.warmup_steps or self.total_steps == 0:
            raise InvalidHyperparameterError(
                f"total_steps must be positive and at least warmup_steps={self.warmup_steps}, got {self.total_steps}")

    def __call__(self, step: int) -> float:
        s = _count("step", step)
        if s < self.warmup_steps:
            return self.peak_lr * (s + 1) / self.warmup_steps
        decay = self.total_steps - self.warmup_steps
        if s >= self.total_steps or decay == 0:
            return self.min_lr if decay else self.peak_lr
        progress = (s - self.warmup_steps) / decay
        return self.min_lr + (self.peak_lr - self.min_lr) * 0.5 * (1.0 + float(elementary.cos(math.pi * progress)))

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serializable description; schedule_from_dict(to_dict()) == self."""
        return {"schedule": "warmup_cosine", "peak_lr": self.peak_lr, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps, "min_lr": self.min_lr}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WarmupCosine) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return (f"WarmupCosine({self.peak_lr!r}, warmup_steps={self.warmup_steps}, "
                f"total_steps={self.total_steps}, min_lr={self.min_lr!r})")


def warmup_cosine(peak_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> WarmupCosine:
    """Linear warmup then cosine decay; see WarmupCosine."""
    return WarmupCosine(peak_lr, warmup_steps=warmup_steps, total_steps=total_steps, min_lr=min_lr)


def schedule_from_dict(d: Mapping[str, Any]) -> WarmupCosine:
    """Rebuilds a schedule written by its to_dict()."""
    if not isinstance(d, Mapping) or d.get("schedule") != "warmup_cosine":
        raise InvalidHyperparameterError(f"unknown learning-rate schedule {d!r}")
    keys = {"schedule", "peak_lr", "warmup_steps", "total_steps", "min_lr"}
    if set(d) != keys:
        raise InvalidHyperparameterError(f"warmup_cosine schedule needs exactly the keys {sorted(keys)}, "
                                         f"got {sorted(d)}")
    return WarmupCosine(d["peak_lr"], warmup_steps=d["warmup_steps"], total_steps=d["total_steps"],
                        min_lr=d["min_lr"])


def _learning_rate(lr: Any) -> LearningRate:
    if isinstance(lr, Mapping):
        return schedule_from_dict(lr)
    if callable(lr):
        return lr
    return _real("lr", lr)


def _checked_factors(factors: Any, params: Tuple[NamedParameter, ...],
                     fields: Tuple[str, ...]) -> Optional[Dict[str, Dict[str, float]]]:
    """Per-parameter factors as {name: {field: factor}} with every field present, or None when
    every factor is 1.0. Unknown names or fields and factors that are not finite and >= 0 are
    refused with InvalidHyperparameterError naming them."""
    if factors is None:
        return None
    if not isinstance(factors, Mapping):
        raise InvalidHyperparameterError(f"factors must map parameter names to {{field: factor}}, got "
                                         f"{type(factors).__name__}")
    names = {p.name for p in params}
    out: Dict[str, Dict[str, float]] = {}
    for name, entry in factors.items():
        if name not in names:
            raise InvalidHyperparameterError(f"factors name {name!r:.80}, which is not a parameter of this optimizer")
        if not isinstance(entry, Mapping) or not set(entry) <= set(fields):
            raise InvalidHyperparameterError(f"factors of {name} must map some of {list(fields)} to numbers, "
                                             f"got {entry!r:.120}")
        row = {}
        for f in fields:
            v = _real(f"factors[{name!r}][{f!r}]", entry.get(f, 1.0))
            if not (math.isfinite(v) and v >= 0.0):
                raise InvalidHyperparameterError(f"factors[{name!r}][{f!r}] must be finite and >= 0, got {v!r}")
            row[f] = v
        if any(v != 1.0 for v in row.values()):
            out[name] = row
    return out or None


def _parameter_tuple(parameters: Any) -> Tuple[NamedParameter, ...]:
    if isinstance(parameters, NamedParameter) or not isinstance(parameters, Iterable):
        raise ArgumentTypeError("parameters must be an iterable of NamedParameter, e.g. model.parameters, "
                                f"got {type(parameters).__name__} {str(parameters)[:80]!r}")
    params = tuple(parameters)
    if not params:
        raise OptimizerStateError("the optimizer got an empty parameter list")
    names = set()
    for i, p in enumerate(params):
        if not isinstance(p, NamedParameter):
            raise ArgumentTypeError(f"parameters[{i}] must be a NamedParameter, got {type(p).__name__} "
                                    f"{str(p)[:80]!r}")
        if p.name in names:
            raise OptimizerStateError(f"parameter {p.name!r} appears twice (index {i})")
        names.add(p.name)
    return params


class Optimizer:
    """Base of the core-stepped optimizers: one C call updates every parameter, all or nothing."""

    _kind = ""        # the core's name for the update
    _nonnegative_slots: Tuple[str, ...] = ()  # slots that accumulate squares
    _fields: Tuple[str, ...] = ()  # hyperparameters in the core's order (lr first)
    _factor_fields: Tuple[str, ...] = ()  # hyperparameters a per-parameter factor may scale
    _bound: Optional[tuple] = None  # (lr, hyper, factors, slots, the update bound to them) of _step_update

    def __init__(self, parameters: Iterable[NamedParameter], lr: LearningRate, hyper: Dict[str, float],
                 factors: Any = None) -> None:
        self._params = _parameter_tuple(parameters)
        self._turn = InTurn()
        self._lr = _learning_rate(lr)
        self._hyper = hyper
        self._factors = _checked_factors(factors, self._params, self._factor_fields)
        self._step = 0
        self._check(self._current_lr(0))
        self._slots = {p.name: tuple(np.zeros(p.shape) for _ in self.slot_names) for p in self._params}

    # ---- what subclasses declare
    @property
    def slot_names(self) -> Tuple[str, ...]:
        """Names of the per-parameter state tensors, in checkpoint order."""
        raise NotImplementedError

    def hyperparameters(self) -> Dict[str, Any]:
        """Constructor keywords that rebuild this optimizer (lr as a number or a schedule dict)."""
        raise NotImplementedError

    # ---- public surface
    @property
    def parameters(self) -> Tuple[NamedParameter, ...]:
        """The parameters this optimizer updates, in order."""
        return self._params

    @property
    def step_count(self) -> int:
        """Updates taken so far."""
        return self._step

    @property
    def lr(self) -> float:
        """The learning rate the next step() will use."""
        return self._current_lr(self._step)

    @property
    def schedule(self) -> Optional[Schedule]:
        """The learning-rate schedule, or None for a constant rate."""
        return None if isinstance(self._lr, float) else self._lr

    def slot(self, name: str, slot: str) -> np.ndarray:
        """A read-only view of one state tensor, e.g. slot('final_norm.gain', 'exp_avg')."""
        if not isinstance(name, str) or not isinstance(slot, str):
            raise ArgumentTypeError(f"slot(name, slot) takes two strings, got {name!r:.80} and {slot!r:.80}")
        try:
            arr = self._slots[name][self.slot_names.index(slot)]
        except (KeyError, ValueError):
            raise UnknownNameError(f"no optimizer slot {name!r}.{slot!r}; this optimizer keeps "
                                   f"{list(self.slot_names)} for each of its {len(self._params)} parameters") from None
        view = arr.view()
        view.setflags(write=False)
        return view

    def zero_grad(self) -> None:
        """Resets every parameter's accumulated gradient to +0.0, all at once (a step on another
        thread runs wholly before or wholly after)."""
        with self._turn("zero_grad()"):
            _graph.zero_grads([p._p for p in self._params])

    def step(self) -> None:
        """One update of every parameter from its accumulated gradient. A result that would be
        NaN or infinite refuses the whole step: no value, slot, revision or step count changes.
        Steps from several threads run one at a time, and forwards of the model wait for a step
        (docs/numerics-concurrency.md, C7)."""
        with self._turn("step()"):
            self._step_alone()

    def _step_alone(self) -> None:
        if self._step >= MAX_STEP:
            raise OptimizerStateError(f"{type(self).__name__} has taken {self._step} steps, the most it counts")
        lr = self._current_lr(self._step)
        self._check(lr)
        slots = [tuple(a.reshape(-1) for a in self._slots[p.name]) for p in self._params]
        try:
            _optim.optim_step(self._kind, [p._p for p in self._params], slots,
                             self._core_hparams(lr), self._step + 1)
        except CoreError as err:
            self._raise(err)
        self._step += 1

    def _step_update(self) -> Any:
        """The core update of the next step with step()'s checks, bound to the slots; a training
        step (DecoderModel.train_step) runs it. Reused while the rate (its bits), the
        hyperparameters and the slots stay the same objects. The caller holds this optimizer's turn."""
        if self._step >= MAX_STEP:
            raise OptimizerStateError(f"{type(self).__name__} has taken {self._step} steps, the most it counts")
        lr = self._current_lr(self._step)
        b = self._bound
        if (b is not None and b[1] is self._hyper and b[2] is self._factors and b[3] is self._slots
                and (b[0] is lr or b[0].hex() == lr.hex())):
            return b[4]
        self._check(lr)
        slots = [tuple(a.reshape(-1) for a in self._slots[p.name]) for p in self._params]
        try:
            update = _optim._Prepared(self._kind, [p._p for p in self._params], slots, self._core_hparams(lr))
        except CoreError as err:
            self._raise(err)
        self._bound = (lr, self._hyper, self._factors, self._slots, update)
        return update

    def state_dict(self) -> Dict[str, Any]:
        """Copies of everything a resumed run needs: kind, hyperparameters, step, parameter
        names and every slot (float64 arrays shaped like their parameters), as they are between
        two whole steps."""
        with self._turn("state_dict()"):
            return {"optimizer": type(self).__name__, "hyperparameters": self.hyperparameters(),
                    "step": self._step, "parameters": [p.name for p in self._params],
                    "slots": {p.name: {s: a.copy() for s, a in zip(self.slot_names, self._slots[p.name])}
                              for p in self._params}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores a state_dict() of the same kind over the same parameter names; everything
        is checked before anything changes; a step on another thread runs wholly before or after."""
        with self._turn("load_state_dict()"):
            self._load_alone(state)

    def _load_alone(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping):
            raise OptimizerStateError(f"optimizer state must be a mapping, got {type(state).__name__}")
        missing = [k for k in ("optimizer", "hyperparameters", "step", "parameters", "slots") if k not in state]
        if missing:
            raise OptimizerStateError(f"optimizer state is missing {', '.join(missing)}")
        if state["optimizer"] != type(self).__name__:
            raise OptimizerStateError(f"state of a {state['optimizer']!r} optimizer cannot load into "
                                      f"{type(self).__name__}")
        names = [p.name for p in self._params]
        if not isinstance(state["parameters"], (list, tuple)) or list(state["parameters"]) != names:
            raise OptimizerStateError(f"optimizer state covers parameters {str(state['parameters'])[:200]}, "
                                      f"this optimizer {names}")
        hyper = state["hyperparameters"]
        if not isinstance(hyper, Mapping) or not all(isinstance(k, str) for k in hyper):
            raise OptimizerStateError(f"optimizer hyperparameters must be a mapping of names to values, "
                                      f"got {type(hyper).__name__} {str(hyper)[:80]!r}")
        try:
            fresh = type(self)(self._params, **dict(hyper))
        except TypeError as err:
            raise OptimizerStateError(f"optimizer hyperparameters {state['hyperparameters']!r}: {err}") from None
        try:
            step = _count("step", state["step"])
            if step > MAX_STEP:
                raise InvalidHyperparameterError(
                    f"step must be at most 2**53 (the steps an optimizer counts), got {step}")
        except InvalidHyperparameterError as err:
            raise OptimizerStateError(str(err)) from None
        slots = _checked_slots(state["slots"], self._params, fresh.slot_names, fresh._nonnegative_slots)
        self._lr, self._hyper, self._factors, self._step = fresh._lr, fresh._hyper, fresh._factors, step
        self._slots = {n: tuple(np.ascontiguousarray(a) for a in s) for n, s in slots.items()}

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        del state["_turn"]  # a lock is this process's; a copy takes its turns afresh
        state.pop("_bound", None)  # core pointers into this object's slots: a copy binds its own
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._turn = InTurn()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self._params)} tensors, step={self._step}, {self.hyperparameters()})"

    # ---- internals
    def _current_lr(self, step: int) -> float:
        if isinstance(self._lr, float):
            return self._lr
        value = self._lr(step)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidHyperparameterError(f"the lr schedule returned {value!r} at step {step}; "
                                             "expected a real number")
        return float(value)

    @property
    def factors(self) -> Dict[str, Dict[str, float]]:
        """Per-parameter factors ``{name: {field: factor}}`` of the parameters that have any
        other than 1.0 (docs/numerics-optimizers.md, per-parameter factors); empty when none."""
        return {n: dict(row) for n, row in (self._factors or {}).items()}

    def _tensor_hparams(self, lr: float, name: str) -> tuple:
        """One parameter's hyperparameters: each scaled one by its factor, one rounded product."""
        row = (self._factors or {}).get(name)
        base = {"lr": lr, **self._hyper}
        if row is not None:
            base.update({f: base[f] * v for f, v in row.items() if v != 1.0})
        return tuple(base[f] for f in self._fields)

    def _core_hparams(self, lr: float) -> Any:
        if self._factors is None:
            return (lr, *(self._hyper[f] for f in self._fields[1:]))
        return [self._tensor_hparams(lr, p.name) for p in self._params]

    def _check(self, lr: float) -> None:
        try:
            _optim.optim_check(self._kind, self._core_hparams(lr))
        except CoreError as err:
            self._raise(err)
        names = [p.name for p in self._params] if self._factors else [""]
        for name in names:
            h = dict(zip(self._fields, self._tensor_hparams(lr, name)))
            lr_p, wd = h["lr"], h["weight_decay"]
            if not lr_p * wd < 1.0:  # each step scales parameters by 1 - lr*wd: at 1 or beyond it is no decay
                where = f" for {name}" if name else ""
                raise InvalidHyperparameterError(
                    f"{type(self).__name__} lr*weight_decay must be in [0, 1) (a decay factor 1 - lr*weight_decay in "
                    f"(0, 1]){where}, got lr {lr_p!r} * weight_decay {wd!r} = {lr_p * wd!r}")

    def _raise(self, err: CoreError) -> NoReturn:
        call = _translate.OptimizerCall(type(self).__name__, self._fields, [p.name for p in self._params],
                                        self.slot_names, self._step + 1)
        _translate.raise_core(err, optimizer=call)


def _checked_slots(slots: Any, params: Tuple[NamedParameter, ...], names: Tuple[str, ...],
                   nonnegative: Tuple[str, ...] = ()) -> Dict[str, tuple]:
    if not isinstance(slots, Mapping):
        raise OptimizerStateError(f"optimizer slots must be a mapping, got {type(slots).__name__}")
    out: Dict[str, tuple] = {}
    for p in params:
        entry = slots.get(p.name)
        if not isinstance(entry, Mapping) or set(entry) != set(names):
            got = sorted(entry) if isinstance(entry, Mapping) else entry
            raise OptimizerStateError(f"optimizer slots of {p.name} must be exactly {list(names)}, got {got!r}")
        arrays = []
        for s in names:
            a = np.asarray(entry[s])
            if a.dtype != np.float64 or a.shape != p.shape:
                raise OptimizerStateError(f"optimizer slot {p.name}.{s} must be float64 of shape {p.shape}, "
                                          f"got {a.dtype} {a.shape}")
            bad = np.flatnonzero(~np.isfinite(a))
            if bad.size:
                raise OptimizerStateError(f"optimizer slot {p.name}.{s} has non-finite value "
                                          f"{float(a.flat[bad[0]])!r} at flat index {bad[0]}")
            neg = np.flatnonzero(a < 0.0) if s in nonnegative else np.empty(0, dtype=np.intp)
            if len(neg):
                raise OptimizerStateError(f"optimizer slot {p.name}.{s} holds squares but has negative value "
                                          f"{float(a.flat[neg[0]])!r} at flat index {neg[0]}")
            arrays.append(np.array(a, dtype=np.float64, order="C"))
        out[p.name] = tuple(arrays)
    extra = sorted(set(slots) - {p.name for p in params})
    if extra:
        raise OptimizerStateError(f"optimizer slots name unknown parameters {extra}")
    return out


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and L2 weight decay (PyTorch's SGD
    with dampening 0, no Nesterov): d = g + wd*p; b = d at the first step, else b*momentum + d;
    p = p - lr*b. Slot: momentum_buffer (only when momentum != 0). ``factors`` ({name: {"lr"
    or "weight_decay": factor}}) gives a parameter ``lr*factor`` and ``weight_decay*factor``
    (docs/numerics-optimizers.md, per-parameter factors), like torch parameter groups."""

    _kind = "sgd"
    _fields = ("lr", "momentum", "weight_decay")
    _factor_fields = ("lr", "weight_decay")

    def __init__(self, parameters: Iterable[NamedParameter], lr: LearningRate, momentum: float = 0.0,
                 weight_decay: float = 0.0, *, factors: Optional[Mapping[str, Mapping[str, float]]] = None) -> None:
        super().__init__(parameters, lr, {"momentum": _real("momentum", momentum),
                                          "weight_decay": _real("weight_decay", weight_decay)}, factors)

    @property
    def slot_names(self) -> Tuple[str, ...]:
        """``("momentum_buffer",)`` with momentum, else none."""
        return ("momentum_buffer",) if self._hyper["momentum"] != 0.0 else ()

    def hyperparameters(self) -> Dict[str, Any]:
        lr = self._lr if isinstance(self._lr, float) else _schedule_dict(self._lr)
        out = {"lr": lr, "momentum": self._hyper["momentum"], "weight_decay": self._hyper["weight_decay"]}
        return {**out, "factors": self.factors} if self._factors else out


class AdamW(Optimizer):
    """Adam with decoupled weight decay and bias correction (PyTorch's AdamW semantics).
    Slots: exp_avg, exp_avg_sq. ``factors`` ({name: {"lr", "eps" or "weight_decay": factor}})
    gives a parameter ``lr*factor``, ``eps*factor`` and ``weight_decay*factor``
    (docs/numerics-optimizers.md, per-parameter factors), like torch parameter groups."""

    _kind = "adamw"
    _nonnegative_slots = ("exp_avg_sq",)
    _fields = ("lr", "beta1", "beta2", "eps", "weight_decay")
    _factor_fields = ("lr", "eps", "weight_decay")

    def __init__(self, parameters: Iterable[NamedParameter], lr: LearningRate = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, *, factors: Optional[Mapping[str, Mapping[str, float]]] = None) -> None:
        try:
            b1, b2 = betas
        except (TypeError, ValueError):
            raise InvalidHyperparameterError(f"betas must be a pair of real numbers, got {betas!r}") from None
        super().__init__(parameters, lr, {"beta1": _real("beta1", b1), "beta2": _real("beta2", b2),
                                          "eps": _real("eps", eps),
                                          "weight_decay": _real("weight_decay", weight_decay)}, factors)

    @property
    def slot_names(self) -> Tuple[str, ...]:
        """The first and second moment estimates, ``("exp_avg", "exp_avg_sq")``."""
        return ("exp_avg", "exp_avg_sq")

    def hyperparameters(self) -> Dict[str, Any]:
        h = self._hyper
        lr = self._lr if isinstance(self._lr, float) else _schedule_dict(self._lr)
        out = {"lr": lr, "betas": [h["beta1"], h["beta2"]], "eps": h["eps"], "weight_decay": h["weight_decay"]}
        return {**out, "factors": self.factors} if self._factors else out


def _schedule_dict(schedule: Schedule) -> Any:
    to_dict = getattr(schedule, "to_dict", None)
    return to_dict() if callable(to_dict) else schedule
