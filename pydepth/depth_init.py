# SPDX-License-Identifier: MIT
"""Depth-scaled initialization of a decoder's residual output projections (chapter 6, docs/numerics.md §3.3).

A fresh preparation draws one Xavier base decoder from a clone of the caller's generator;
completion multiplies the stored values of every ``blocks.{b}.attention.output.weight`` and
``blocks.{b}.ffn.down.weight`` once by ``1/sqrt(layers)`` and only then commits the trial
generator state to the caller. One complete block returns the base decoder itself.
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np

from ._native._bits import float_bits
from ._native._rng import SplitMix64
from ._checks import as_u64
from .config import DecoderConfig
from .errors import (AlreadyCompletedError, ArgumentTypeError, BudgetExceededError, DepthInitError,
                     DepthScaleError, InvalidBudgetError, InvalidFactorError,
                     ModifiedFreshParameterError, NotFreshError, ParameterLayoutError, RecordFormatError,
                     ParameterNameError, RecordMismatchError, ZeroDepthError)
from .model import DecoderModel, NamedParameter

__all__ = ["POLICY_ID", "BASE_INITIALIZER_ID", "DepthScalePolicy", "DepthInitializationBudget",
           "FreshDepthInitialization", "DepthInitializationRecord", "DepthInitializedDecoder",
           "Fresh", "Initialized", "Restored", "initialize_depth_scaled"]

#: Identifier of the selective residual-output depth policy recorded with every construction.
POLICY_ID = "residual-output-init-depth-v1"
#: Identifier of the base initializer: Xavier-uniform matrices drawn from SplitMix64, unit gains.
BASE_INITIALIZER_ID = "xavier-uniform-splitmix64-v1"

_U64 = 2**64
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15  # SplitMix64 advances its state by this constant per draw
_SELECTED = re.compile(r"blocks\.(0|[1-9][0-9]*)\.(?:attention\.output|ffn\.down)\.weight")


def _nonneg_int(name: str, value: Any, error: type) -> int:
    return as_u64(name, value, error)


# ---------------------------------------------------------------------------------------------
# Policy and budget


class DepthScalePolicy:
    """The checked factor ``1/sqrt(depth)`` for a positive number of complete decoder blocks.

    ``depth`` must be an ``int`` (not ``bool``); 0 raises :class:`ZeroDepthError`, a negative or
    non-integer depth :class:`DepthScaleError`, and a factor that is not positive and finite
    (a depth too large for float64) :class:`InvalidFactorError`.
    """

    __slots__ = ("_depth", "_factor")

    def __init__(self, depth: int) -> None:
        if isinstance(depth, bool):
            raise DepthScaleError(f"depth must be an integer count of complete blocks, got {depth!r}")
        try:
            d = operator.index(depth)
        except TypeError:
            raise DepthScaleError(
                f"depth must be an integer count of complete blocks, got {depth!r}") from None
        if d < 0:
            raise DepthScaleError(f"depth must be a non-negative block count, got {d}")
        if d == 0:
            raise ZeroDepthError("the depth policy needs at least one complete block, got depth 0")
        try:
            as_float = float(d)
        except OverflowError:  # like a saturating integer-to-float conversion
            as_float = math.inf
        factor = 1.0 / math.sqrt(as_float)
        if not math.isfinite(factor) or factor <= 0.0:
            raise InvalidFactorError(f"depth {d} gives factor {factor!r}, which is not positive and finite")
        self._depth = d
        self._factor = factor

    @property
    def depth(self) -> int:
        """The number of complete decoder blocks L."""
        return self._depth

    @property
    def factor(self) -> float:
        """The initialization factor ``1.0 / math.sqrt(float(L))``."""
        return self._factor

    @property
    def policy_id(self) -> str:
        """The policy identifier, ``"residual-output-init-depth-v1"``."""
        return POLICY_ID

    def selects(self, name: str) -> bool:
        """Whether the parameter ``name`` is a selected residual output projection: exactly
        ``blocks.{b}.attention.output.weight`` or ``blocks.{b}.ffn.down.weight`` with
        ``0 <= b < depth``. Use only on a layout the decoder validator already accepted."""
        if not isinstance(name, str):
            return False
        m = _SELECTED.fullmatch(name)
        return m is not None and int(m.group(1)) < self._depth

    def scales(self, name: str) -> bool:
        """Whether initialization multiplies the parameter ``name`` by the factor: a selected
        name when ``depth > 1`` (at one block the factor is 1.0 and nothing is transformed)."""
        return self._depth > 1 and self.selects(name)

    def apply(self, parameters: Sequence[NamedParameter]) -> List[NamedParameter]:
        """Independent copies of ``parameters`` in order, every tensor this policy
        :meth:`scales` multiplied once by :attr:`factor` (one rounded multiply per element,
        docs/numerics.md §3.3). The given parameters are left as they were."""
        out = []
        for p in parameters:
            copy = NamedParameter(p.name, p.value)
            if self.scales(p.name):
                copy._p.scale_values(self._factor)
            out.append(copy)
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DepthScalePolicy) and other._depth == self._depth

    def __hash__(self) -> int:
        return hash(("DepthScalePolicy", self._depth))

    def __repr__(self) -> str:
        return f"DepthScalePolicy(depth={self._depth}, factor={self._factor!r})"


@dataclass(frozen=True)
class DepthInitializationBudget:
    """Upper bounds a configuration must respect before any model array is allocated:
    total stored parameter scalars and position capacity (both integers in [0, 2**64)).

    The budget is a guard against allocating a model larger than the caller meant to (a typo
    in a width or depth becomes :class:`BudgetExceededError` before any memory is touched).
    :meth:`for_config` gives exactly the budget one configuration needs."""

    max_parameters: int
    max_positions: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_parameters",
                           _nonneg_int("max_parameters", self.max_parameters, InvalidBudgetError))
        object.__setattr__(self, "max_positions",
                           _nonneg_int("max_positions", self.max_positions, InvalidBudgetError))

    @classmethod
    def for_config(cls, config: DecoderConfig) -> DepthInitializationBudget:
        """Exactly the budget ``config`` needs: its stored parameter count and its position
        capacity (so a budget-edge check passes and one more parameter would not)."""
        if not isinstance(config, DecoderConfig):
            raise ArgumentTypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
        return cls(max_parameters=config.parameter_count, max_positions=config.max_positions)

    def check(self, config: DecoderConfig) -> None:
        """Raises :class:`BudgetExceededError` naming both numbers when ``config`` exceeds this
        budget. Uses the configuration's checked arithmetic only; allocates nothing."""
        count = config.parameter_count
        if count > self.max_parameters:
            raise BudgetExceededError(
                f"configuration needs {count} parameters, budget allows {self.max_parameters}")
        if config.max_positions > self.max_positions:
            raise BudgetExceededError(
                f"configuration needs {config.max_positions} positions, budget allows {self.max_positions}")


# ---------------------------------------------------------------------------------------------
# Construction record


def _base_draws(config: DecoderConfig) -> int:
    """Random draws of the base initializer: one per matrix scalar; norm gains draw nothing."""
    return config.parameter_count - (2 * config.layers + 1) * config.model_width


def _expected_transformed(layers: int) -> int:
    return 0 if layers == 1 else 2 * layers


@dataclass(frozen=True)
class DepthInitializationRecord:
    """How a depth-initialized decoder was constructed: configuration, factor, policy and base
    initializer identifiers, the caller's generator state before and after, and the number of
    transformed tensors (0 at one block, else ``2 * layers``). JSON round trip via
    :meth:`to_dict` / :meth:`from_dict` is lossless.

    Not to be confused with a :class:`pydepth.ForwardRecord` (what one forward pass produced)
    or with ``forward(record=...)`` (whether that pass keeps its intermediate values)."""

    config: DecoderConfig
    factor: float
    policy_id: str
    base_initializer_id: str
    initial_rng_state: int
    final_rng_state: int
    transformed_tensors: int

    def __post_init__(self) -> None:
        if not isinstance(self.config, DecoderConfig):
            raise ArgumentTypeError(f"config must be a DecoderConfig, got {type(self.config).__name__}")
        if isinstance(self.factor, bool) or not isinstance(self.factor, (float, int)):
            raise ArgumentTypeError(f"factor must be a float, got {self.factor!r}")
        object.__setattr__(self, "factor", float(self.factor))
        for name in ("policy_id", "base_initializer_id"):
            if not isinstance(getattr(self, name), str):
                raise ArgumentTypeError(f"{name} must be a str, got {getattr(self, name)!r}")
        for name in ("initial_rng_state", "final_rng_state", "transformed_tensors"):
            object.__setattr__(self, name, _nonneg_int(name, getattr(self, name), RecordFormatError))

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serializable dict: generator states as decimal strings, the factor as a float
        and as its 16-hex-digit IEEE-754 bit pattern."""
        return {"format": "pydepth-depth-init-record-v1",
                "config": self.config.to_dict(),
                "factor": self.factor,
                "factor_bits": float_bits(self.factor),
                "policy_id": self.policy_id,
                "base_initializer_id": self.base_initializer_id,
                "initial_rng_state": str(self.initial_rng_state),
                "final_rng_state": str(self.final_rng_state),
                "transformed_tensors": self.transformed_tensors}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DepthInitializationRecord:
        """Rebuilds a record from :meth:`to_dict` output, validating every field: malformed
        values raise :class:`RecordFormatError` (a ``ValueError``; :class:`ConfigError` for the
        configuration), values that contradict the policy, the initializer or each other raise
        :class:`RecordMismatchError`."""
        if not isinstance(d, Mapping):
            raise RecordFormatError(f"a record must be a mapping, got {type(d).__name__}")
        expected = {"format", "config", "factor", "factor_bits", "policy_id", "base_initializer_id",
                    "initial_rng_state", "final_rng_state", "transformed_tensors"}
        missing = sorted(expected - set(d))
        unknown = sorted(set(d) - expected)
        if missing or unknown:
            raise RecordFormatError(f"record keys: missing {missing}, unknown {unknown}")
        if not isinstance(d["format"], str) or d["format"] != "pydepth-depth-init-record-v1":
            raise RecordFormatError(f"unknown record format {d['format']!r}")
        if not isinstance(d["config"], Mapping):
            raise RecordFormatError(f"record config must be a mapping, got {d['config']!r}")
        config = DecoderConfig.from_dict(d["config"])
        factor = _record_factor(d["factor"], d["factor_bits"])
        states = [_record_state(key, d[key]) for key in ("initial_rng_state", "final_rng_state")]
        transformed = d["transformed_tensors"]
        if isinstance(transformed, bool) or not isinstance(transformed, int):
            raise RecordFormatError(f"transformed_tensors must be an integer, got {transformed!r}")
        for key in ("policy_id", "base_initializer_id"):
            if not isinstance(d[key], str):
                raise RecordFormatError(f"{key} must be a str, got {d[key]!r}")
        record = cls(config, float(factor), d["policy_id"], d["base_initializer_id"], states[0],
                     states[1], transformed)
        _check_record(record)
        return record


def _record_factor(factor: Any, bits: Any) -> float:
    """A record's factor, checked against its stored bit pattern."""
    if isinstance(factor, bool) or not isinstance(factor, (float, int)):
        raise RecordFormatError(f"factor must be a number, got {factor!r}")
    if not isinstance(bits, str) or not re.fullmatch(r"[0-9a-f]{16}", bits):
        raise RecordFormatError(f"factor_bits must be 16 lowercase hex digits, got {bits!r}")
    try:
        factor = float(factor)
    except OverflowError:
        raise RecordFormatError(f"factor {factor!r} is not representable as a float64") from None
    if float_bits(factor) != bits:
        raise RecordMismatchError(f"factor {factor!r} has bits {float_bits(float(factor))}, record says {bits}")
    return factor


def _record_state(key: str, s: Any) -> int:
    """A generator state stored as a decimal string of an integer in [0, 2**64)."""
    if not isinstance(s, str) or not re.fullmatch(r"0|[1-9][0-9]*", s) or int(s) >= _U64:
        raise RecordFormatError(f"{key} must be a decimal string of an integer in [0, 2**64), got {s!r}")
    return int(s)


def _check_record(record: DepthInitializationRecord) -> DepthScalePolicy:
    """Checks a record against the policy and the base initializer; RecordMismatchError says
    what differs."""
    if record.policy_id != POLICY_ID:
        raise RecordMismatchError(f"record policy {record.policy_id!r} is not {POLICY_ID!r}")
    if record.base_initializer_id != BASE_INITIALIZER_ID:
        raise RecordMismatchError(
            f"record base initializer {record.base_initializer_id!r} is not {BASE_INITIALIZER_ID!r}")
    try:
        policy = DepthScalePolicy(record.config.layers)
    except DepthScaleError as err:
        raise RecordMismatchError(f"record configuration has no depth policy: {err}") from None
    if float_bits(record.factor) != float_bits(policy.factor):
        raise RecordMismatchError(
            f"record factor {record.factor!r} differs from the policy factor {policy.factor!r} "
            f"for {record.config.layers} blocks")
    want = _expected_transformed(record.config.layers)
    if record.transformed_tensors != want:
        raise RecordMismatchError(
            f"record says {record.transformed_tensors} transformed tensors; {record.config.layers} "
            f"blocks transform {want}")
    draws = _base_draws(record.config)
    final = (record.initial_rng_state + draws * _GOLDEN_GAMMA) % _U64
    if final != record.final_rng_state:
        raise RecordMismatchError(
            f"record final generator state {record.final_rng_state} is not the state {final} "
            f"reached from {record.initial_rng_state} after the base initializer's {draws} draws")
    return policy


# ---------------------------------------------------------------------------------------------
# Fresh preparation and completion


class DepthInitializedDecoder:
    """A decoder whose stored residual output projections carry the depth factor, with the
    record of how it was constructed (``.model``, ``.record``)."""

    __slots__ = ("_model", "_record")

    def __init__(self, model: DecoderModel, record: DepthInitializationRecord) -> None:
        if not isinstance(model, DecoderModel):
            raise ArgumentTypeError(f"model must be a DecoderModel, got {type(model).__name__}")
        if not isinstance(record, DepthInitializationRecord):
            raise ArgumentTypeError(f"record must be a DepthInitializationRecord, got {type(record).__name__}")
        if model.config != record.config:
            raise RecordMismatchError(f"model configuration {model.config} differs from the record's {record.config}")
        _check_record(record)
        self._model = model
        self._record = record

    @property
    def model(self) -> DecoderModel:
        """The initialized decoder."""
        return self._model

    @property
    def record(self) -> DepthInitializationRecord:
        """How the decoder was constructed."""
        return self._record

    @classmethod
    def from_initialized_parameters(cls, record: DepthInitializationRecord,
                                    parameters: Sequence[NamedParameter]) -> DepthInitializedDecoder:
        """Restores a decoder from its construction record and the actual stored parameters.

        The record is checked against the policy (id, factor for ``record.config.layers``,
        transformed-tensor count, generator states) and the parameters against the record's
        layout (count, names, order, shapes, finiteness); any difference raises
        :class:`RecordMismatchError` saying what differs. The supplied values are copied exactly
        and never rescaled; nothing is drawn."""
        if not isinstance(record, DepthInitializationRecord):
            raise RecordMismatchError(f"record must be a DepthInitializationRecord, got {type(record).__name__}")
        _check_record(record)
        try:
            params = list(parameters)
        except TypeError:
            raise RecordMismatchError(f"parameters must be a sequence of NamedParameter, got "
                                      f"{type(parameters).__name__}") from None
        if len(params) != record.config.parameter_tensor_count:  # before the O(layers) layout
            raise RecordMismatchError(f"record layout has {record.config.parameter_tensor_count} "
                                      f"parameter tensors, got {len(params)}")
        layout = record.config.parameter_layout()
        for i, (p, (name, shape)) in enumerate(zip(params, layout)):
            if not isinstance(p, NamedParameter):
                raise RecordMismatchError(f"parameter {i} must be a NamedParameter, got {type(p).__name__}")
            if p.name != name:
                raise RecordMismatchError(f"parameter {i} is named {p.name!r}; the record's layout has {name!r}")
            if p.shape != shape:
                raise RecordMismatchError(f"{name} has shape {p.shape}; the record's layout has {shape}")
            bad = np.flatnonzero(~np.isfinite(p.value))
            if bad.size:
                raise RecordMismatchError(f"{name} holds non-finite value {p.value.flat[bad[0]]!r} "
                                          f"at flat index {int(bad[0])}")
        copies = [NamedParameter(p.name, p.value) for p in params]
        try:
            model = DecoderModel.from_parameters(record.config, copies)
        except (ParameterLayoutError, ParameterNameError) as err:
            raise RecordMismatchError(f"parameters do not fit the record's layout: {err}") from None
        return cls(model, record)

    def __repr__(self) -> str:
        return f"DepthInitializedDecoder({self._model!r}, factor={self._record.factor!r})"


_PREPARE_TOKEN = object()


class FreshDepthInitialization:
    """A prepared fresh depth initialization: one base decoder drawn from a clone of the
    caller's generator. The caller's generator is untouched until :meth:`complete` succeeds;
    dropping the preparation leaves it untouched. Build with :meth:`prepare`."""

    __slots__ = (
        "_base",
        "_caller_rng",
        "_completed",
        "_config",
        "_initial_state",
        "_policy",
        "_revisions",
        "_trial_rng",
    )
    _base: DecoderModel
    _caller_rng: SplitMix64
    _completed: bool
    _config: DecoderConfig
    _initial_state: int
    _policy: DepthScalePolicy
    _revisions: Tuple[int, ...]
    _trial_rng: SplitMix64

    def __init__(self, *args: Any, _token: object = None, **kwargs: Any) -> None:
        if _token is not _PREPARE_TOKEN:
            raise ArgumentTypeError("use FreshDepthInitialization.prepare(config, budget, rng)")

    @classmethod
    def prepare(cls, config: DecoderConfig, budget: DepthInitializationBudget,
                rng: SplitMix64) -> FreshDepthInitialization:
        """Checks the depth policy and the budget (before any model array is allocated), then
        draws the base decoder once from a clone of ``rng``.

        Raises :class:`ZeroDepthError` for ``config.layers == 0`` and
        :class:`BudgetExceededError` naming both numbers when the parameter count or the
        position capacity exceeds ``budget``; ``rng`` is never advanced here."""
        if not isinstance(config, DecoderConfig):
            raise ArgumentTypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
        if not isinstance(budget, DepthInitializationBudget):
            raise ArgumentTypeError(f"budget must be a DepthInitializationBudget, got {type(budget).__name__}")
        if not isinstance(rng, SplitMix64):
            raise ArgumentTypeError(f"rng must be a pydepth.SplitMix64, got {type(rng).__name__}")
        policy = DepthScalePolicy(config.layers)
        budget.check(config)
        initial = rng.state
        trial = rng.copy()
        base = DecoderModel(config, trial)
        self = cls(_token=_PREPARE_TOKEN)
        self._config = config
        self._policy = policy
        self._base = base
        self._revisions = tuple(p.revision for p in base.parameters)
        self._caller_rng = rng
        self._initial_state = initial
        self._trial_rng = trial
        self._completed = False
        return self

    @property
    def base_model(self) -> DecoderModel:
        """The base decoder drawn from the cloned generator (unscaled Xavier values)."""
        return self._base

    @property
    def policy(self) -> DepthScalePolicy:
        """The depth policy for ``config.layers``."""
        return self._policy

    @property
    def config(self) -> DecoderConfig:
        """The decoder configuration."""
        return self._config

    @property
    def completed(self) -> bool:
        """Whether :meth:`complete` has succeeded."""
        return self._completed

    def complete(self) -> DepthInitializedDecoder:
        """Completes the initialization and commits the trial generator state to the caller.

        Refuses, before any transformation or commit, with :class:`AlreadyCompletedError` on a
        second call, :class:`ModifiedFreshParameterError` (naming the parameter) when a base
        parameter's values changed or holds a non-zero gradient, and :class:`DepthInitError`
        when the caller's generator was advanced since :meth:`prepare`. At one block the base
        decoder itself is returned; otherwise new copies are built, each selected tensor is
        multiplied once by the factor, and the model is rebuilt by
        :meth:`DecoderModel.from_parameters`; the base decoder is left as it was."""
        if self._completed:
            raise AlreadyCompletedError("this fresh depth initialization was already completed")
        for p, revision in zip(self._base.parameters, self._revisions):
            if p.revision != revision:
                raise ModifiedFreshParameterError(
                    f"base parameter {p.name} was updated after prepare() (revision {revision} -> {p.revision})")
            if not p._p.grad_is_zero():
                raise ModifiedFreshParameterError(f"base parameter {p.name} holds a non-zero gradient")
        if self._caller_rng.state != self._initial_state:
            raise DepthInitError(
                f"the caller's generator moved from state {self._initial_state} to "
                f"{self._caller_rng.state} after prepare(); committing would discard those draws")
        policy = self._policy
        if policy.depth == 1:
            model = self._base  # exact leaves, values and generator consumption
            transformed = 0
        else:
            transformed = sum(policy.scales(p.name) for p in self._base.parameters)
            if transformed != _expected_transformed(policy.depth):
                raise DepthInitError(f"selected {transformed} tensors, expected {2 * policy.depth}")
            model = DecoderModel.from_parameters(self._config, policy.apply(self._base.parameters))
        record = DepthInitializationRecord(
            config=self._config, factor=policy.factor, policy_id=POLICY_ID,
            base_initializer_id=BASE_INITIALIZER_ID, initial_rng_state=self._initial_state,
            final_rng_state=self._trial_rng.state, transformed_tensors=transformed)
        result = DepthInitializedDecoder(model, record)
        self._caller_rng._set_state(self._trial_rng.state)
        self._completed = True
        return result

    def __repr__(self) -> str:
        return (f"FreshDepthInitialization(layers={self._config.layers}, "
                f"factor={self._policy.factor!r}, completed={self._completed})")


# ---------------------------------------------------------------------------------------------
# Construction states


@dataclass(frozen=True)
class Fresh:
    """A construction source that has not been initialized: configuration, budget, generator."""

    config: DecoderConfig
    budget: DepthInitializationBudget
    rng: SplitMix64 = field(compare=False)


@dataclass(frozen=True)
class Initialized:
    """A decoder that already carries its depth initialization (and perhaps training)."""

    init: DepthInitializedDecoder


@dataclass(frozen=True)
class Restored:
    """A decoder restored from a record and stored parameters."""

    init: DepthInitializedDecoder


Source = Union[Fresh, Initialized, Restored]


def initialize_depth_scaled(source: Source) -> DepthInitializedDecoder:
    """Initializes a :class:`Fresh` source (prepare, then complete). :class:`Initialized` and
    :class:`Restored` sources, and anything else, are refused with :class:`NotFreshError`
    before any draw or mutation: their coefficients already carry their history."""
    if isinstance(source, Fresh):
        return FreshDepthInitialization.prepare(source.config, source.budget, source.rng).complete()
    if isinstance(source, (Initialized, Restored)):
        raise NotFreshError(
            f"{type(source).__name__} parameters already carry their initialization; only a Fresh "
            "source may be initialized")
    raise NotFreshError(f"source must be Fresh, Initialized or Restored, got {type(source).__name__}")
