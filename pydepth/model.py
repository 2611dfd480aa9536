# SPDX-License-Identifier: MIT
"""DecoderModel, its named parameters, forward records and graph values."""
from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, cast

import numpy as np

from ._native import _graph, _layout, _nodes, _status, _step
from ._native._rng import SplitMix64
from ._native._translate import LOSS_ATTACHED, raise_core
from .batch import Batch
from .config import DecoderConfig
from ._checks import branch_tuple, plain_array
from .errors import (AllocationError, ArgumentTypeError, AutodiffError, ForeignRecordError, GraphReleasedError,
                     OptimizerStateError, ParameterLayoutError, ParameterNameError, ParametrizationError,
                     StateDictError, TokenError, UnknownNameError, ValueNotKeptError)

#: forward(keep=...) -> the core's record mode for a recorded graph.
_KEEP_MODES: Dict[str, int] = {"all": _layout.RECORD_ALL, "training": _layout.RECORD_TRAINING}
# read on every training step; module globals spare the attribute lookups
_LOSS, _RECORD_NONE, _RECORD_TRAINING = _nodes.LOSS, _layout.RECORD_NONE, _layout.RECORD_TRAINING
#: Why a value is missing, by ForwardRecord.keeps.
_NOT_KEPT: Dict[str, str] = {
    "sites": "forward(record=False) keeps only residual sites, the final norm output and logits",
    "training": "forward(keep='training') keeps only what a training step reads; use keep='all' to read it",
    "all": "this record holds no such value",
}


class _RecordingState(threading.local):
    """Per-thread recording switch; the class default keeps the lookup off the missing-attribute path."""

    recording: bool = True


_local = _RecordingState()


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Within this context, forward passes compute the same bits without recording a graph."""
    previous = _local.recording
    _local.recording = False
    try:
        yield
    finally:
        _local.recording = previous


def is_recording() -> bool:
    """Whether forward passes record a graph by default here (False inside no_grad())."""
    return _local.recording


def _validate_name(name: Any) -> str:
    if not isinstance(name, str):
        raise ParameterNameError(f"parameter name must be a str, got {name!r}")
    try:
        raw = name.encode("ascii")
    except UnicodeEncodeError:
        raise ParameterNameError(f"parameter name {name!r} has a non-ASCII character") from None
    try:
        _layout.validate_name_raw(raw)
    except _status.CoreError as err:
        raise ParameterNameError(
            f"invalid parameter name {name!r} at byte {err.index}: names are dot-separated "
            "non-empty segments of lowercase ASCII letters, digits and '_'") from None
    return name


def _real_array(name: str, values: Any) -> np.ndarray:
    """values as a C-contiguous float64 array; bool, complex, string and object data refused."""
    arr = plain_array(f"parameter {name}", values, ParameterLayoutError)
    if arr.dtype.kind not in "iuf":
        raise ParameterLayoutError(f"parameter {name} needs real numbers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.float64)


class NamedParameter:
    """A named float64 parameter tensor with an accumulated gradient and a value revision."""

    __slots__ = ("_name", "_p")

    def __init__(self, name: str, array: Any) -> None:
        self._name = _validate_name(name)
        arr = _real_array(name, array)
        try:
            self._p = _graph._Param(tuple(int(d) for d in arr.shape))
        except (MemoryError, _status.CoreError):
            raise AllocationError(f"cannot allocate parameter {name} of shape {arr.shape}") from None
        self._p.assign(arr.reshape(-1))

    @classmethod
    def _wrap(cls, name: str, p: _graph._Param) -> NamedParameter:
        self = cls.__new__(cls)
        self._name = name
        self._p = p
        return self

    @property
    def name(self) -> str:
        """The validated dotted name."""
        return self._name

    @property
    def shape(self) -> Tuple[int, ...]:
        """The tensor shape."""
        return self._p.shape

    @property
    def size(self) -> int:
        """Number of scalars."""
        return self._p.size

    @property
    def value(self) -> np.ndarray:
        """Read-only float64 view of the stored values (no copy; keeps the buffer alive).

        Change values only with :meth:`assign`: a writable alias of this view (for example
        ``torch.from_numpy(p.value)``, which only warns) writes into the C buffer without
        advancing the revision. A recorded forward remembers a checksum of every parameter, so
        ``backward()`` after such a write raises :class:`StaleOperandError` instead of mixing
        old activations with new weights; a forward run after the write simply sees the new
        values."""
        return np.asarray(self._p.value_view())

    @property
    def grad(self) -> np.ndarray:
        """Read-only float64 view of the accumulated gradient."""
        return np.asarray(self._p.grad_view())

    @property
    def revision(self) -> int:
        """Changes whenever the stored values change."""
        return self._p.revision

    def assign(self, values: Any) -> None:
        """Replaces the stored values (same shape, real, finite) and advances the revision."""
        arr = _real_array(self._name, values)
        if arr.shape != self.shape:
            raise ParameterLayoutError(f"{self._name}: expected shape {self.shape}, got {arr.shape}")
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise ParameterLayoutError(f"{self._name}: non-finite value {arr.flat[bad[0]]!r} at flat index {bad[0]}")
        self._p.assign(np.ascontiguousarray(arr).reshape(-1))

    def snapshot(self) -> np.ndarray:
        """A writable copy of the stored values."""
        return np.array(self.value)

    def __reduce__(self) -> tuple:
        # values, gradient and revision travel exactly; a pickle memo keeps shared identity
        return (_restore_parameter, (self._name, self.snapshot(), np.array(self.grad), self.revision))

    def __repr__(self) -> str:
        return f"NamedParameter({self._name!r}, shape={self.shape}, revision={self.revision})"


def _restore_parameter(name: str, values: np.ndarray, grads: np.ndarray, revision: int) -> NamedParameter:
    p = NamedParameter(name, values)
    p._p.restore(np.ascontiguousarray(values, dtype=np.float64).reshape(-1),
                 np.ascontiguousarray(grads, dtype=np.float64).reshape(-1), revision)
    return p


class GraphValue:
    """One value of a forward record; its identity binds observations to graph nodes."""

    __slots__ = ("__weakref__", "_block", "_kind", "_record")

    def __init__(self, record: ForwardRecord, block: int, kind: int) -> None:
        self._record = record
        self._block = block
        self._kind = kind

    @property
    def name(self) -> str:
        """The trace name of this value."""
        return _nodes.node_name(self._block, self._kind)

    @property
    def record(self) -> ForwardRecord:
        """The forward record this value belongs to."""
        return self._record

    @property
    def value(self) -> np.ndarray:
        """Read-only numpy view of the value."""
        view = self._record._view(self._block, self._kind)
        if view is None:
            raise ValueNotKeptError(f"{self.name} was not kept: {_NOT_KEPT[self._record.keeps]}")
        return view

    @property
    def shape(self) -> Optional[Tuple[int, ...]]:
        """The value's shape, kept or not; ``None`` when the forward computed no such value."""
        return self._record._shape(self._block, self._kind)

    def item(self) -> float:
        """The single value of a one-element value (the loss) as a float."""
        if self._kind == _LOSS:  # a training step's one read: the double itself, no view made
            rec = self._record
            rec._check_alive()
            loss = rec._graph.loss_item()
            if loss is not None:
                return cast(float, loss)
        v = self.value
        if v.size != 1:
            raise ValueError(f"{self.name} has {v.size} elements; item() needs exactly one")
        return float(v.reshape(-1)[0])

    def backward(self) -> None:
        """Reverse pass of the mean loss; parameter gradients accumulate until zero_grad()."""
        self._reverse((), commit=True)

    def backward_with_selected_adjoints(self, selected: Sequence[GraphValue]) -> List[Optional[np.ndarray]]:
        """One ordinary reverse pass that also returns the completed adjoints of the selected
        values (None for a value of this model that is not in this loss's graph). A value of
        another model raises ForeignRecordError before anything runs or is committed."""
        return self._reverse(selected, commit=True)

    def _reverse(self, selected: Sequence[GraphValue], *, commit: bool,
                 decide: Optional[Callable[[List[Optional[np.ndarray]]], bool]] = None
                 ) -> List[Optional[np.ndarray]]:
        """The reverse pass; with commit=False the parameter contributions wait on the graph
        for _commit() (or are dropped by _discard()) so a caller can check adjoints first.
        With decide, decide(adjoints) runs while the pass waits (in the gradients known to be
        +0.0, under the model's lock) and the pass is committed if it returns True, dropped if
        it returns False or raises; decide must not touch the model's gradients or values
        nor run its forward."""
        if self._kind != _LOSS:
            raise AutodiffError(f"backward starts from a rank-0 mean loss, not {self.name}")
        rec = self._record
        rec._check_alive()
        if not selected and decide is None:  # a training step's pass: no buffers or hook to build
            try:
                rec._graph.backward([], [], commit, None)
            except _status.CoreError as err:
                raise_core(err, param_names=[p.name for p in rec.model.parameters])
            return []
        wanted, buffers, where = [], [], []
        results: List[Optional[np.ndarray]] = [None] * len(selected)
        for i, v in enumerate(selected):
            if not isinstance(v, GraphValue):
                raise ArgumentTypeError(f"selected[{i}] must be a GraphValue, got {type(v).__name__}")
            if v._record.model is not rec.model:
                raise ForeignRecordError(f"selected[{i}] ({v.name}) was recorded by another model; "
                                         "a loss has adjoints only for values of its own model")
            if v._record is rec and rec._graph.recorded:
                shape = rec._shape(v._block, v._kind)
                if shape is None:
                    continue
                buf: np.ndarray = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=np.float64)
                wanted.append((v._block, v._kind))
                buffers.append(buf)
                where.append((i, shape))

        def collect(found: List[bool]) -> List[Optional[np.ndarray]]:
            for (i, shape), buf, ok in zip(where, buffers, found):
                if ok:
                    results[i] = buf.reshape(shape)
            return results

        hook = None if decide is None else (lambda found: decide(collect(found)))
        try:
            found = rec._graph.backward(wanted, buffers, commit, hook)
        except _status.CoreError as err:
            raise_core(err, param_names=[p.name for p in rec.model.parameters])
        return collect(found)

    def _commit(self) -> None:
        """Adds the waiting pass of _reverse(commit=False) to the parameter gradients."""
        rec = self._record
        try:
            rec._graph.commit()
        except _status.CoreError as err:
            raise_core(err, param_names=[p.name for p in rec.model.parameters])

    def _discard(self) -> None:
        """Drops the waiting pass of _reverse(commit=False); the gradients stay as they are."""
        self._record._graph.discard()

    def __repr__(self) -> str:
        return f"GraphValue({self.name}, shape={self.shape})"


class BlockForward:
    """The values one decoder block recorded."""

    __slots__ = ("_block", "_record")

    def __init__(self, record: ForwardRecord, block: int) -> None:
        self._record = record
        self._block = block

    def value(self, name: str) -> GraphValue:
        """A value by its in-block trace name, e.g. 'attention.weights'."""
        if name not in _nodes.BLOCK_KIND:
            raise UnknownNameError(f"no block value is named {name!r}")
        return self._record._value(self._block, _nodes.BLOCK_KIND[name])

    @property
    def after_attention(self) -> GraphValue:
        """Residual state after the attention addition."""
        return self.value("after_attention")

    @property
    def output(self) -> GraphValue:
        """Residual state after the feed-forward addition (the next block's input)."""
        return self.value("output")

    @property
    def attention_output(self) -> GraphValue:
        """The attention branch output added to the residual."""
        return self.value("attention.output")

    @property
    def feed_forward_output(self) -> GraphValue:
        """The SwiGLU branch output added to the residual."""
        return self.value("ffn.output")

    @property
    def attention_weights(self) -> GraphValue:
        """Attention probabilities [B, heads, T, T]."""
        return self.value("attention.weights")


class ForwardRecord:
    """Everything one forward pass produced; graph memory is freed with its last reference.

    "Record" names three things in pydepth: ``forward(record=...)`` chooses whether the
    intermediate values are kept for the reverse pass; a ``ForwardRecord`` (this class) is
    what every forward returns, with or without them (see :attr:`recorded`); a
    :class:`pydepth.DepthInitializationRecord` says how a model's parameters were initialized.
    """

    def __init__(self, model: DecoderModel, graph: Any, token_shape: Tuple[int, int],
                 valid: Optional[np.ndarray],
                 targets: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> None:
        self.model = model
        self._graph = graph
        self.token_shape = token_shape
        self._mask = valid  # None: every position valid (built on demand)
        if valid is not None:
            valid.setflags(write=False)
        self._batch_targets = targets  # (as given, int64 for the core) of a Batch
        # weak references: values point at the record, so strong ones would form a cycle
        self._values: dict[Tuple[int, int], weakref.ref[GraphValue]] = {}

    @property
    def blocks(self) -> Tuple[BlockForward, ...]:
        """Per-block views of the recorded values."""
        return tuple(BlockForward(self, b) for b in range(self.model.config.layers))

    # ---- values
    def _value(self, block: int, kind: int) -> GraphValue:
        key = (block, kind)
        ref = self._values.get(key)
        v = ref() if ref is not None else None
        if v is None:
            v = GraphValue(self, block, kind)
            self._values[key] = weakref.ref(v)
        return v

    def _check_alive(self) -> None:
        if self._graph.released:
            raise GraphReleasedError("this forward record was released")

    def _view(self, block: int, kind: int) -> Optional[np.ndarray]:
        self._check_alive()
        raw = self._graph.value(block, kind)
        return None if raw is None else np.asarray(raw)

    def _shape(self, block: int, kind: int) -> Optional[Tuple[int, ...]]:
        self._check_alive()
        return self._graph.value_shape(block, kind)

    @property
    def valid(self) -> np.ndarray:
        """Read-only boolean validity mask [B, T]."""
        if self._mask is None:
            self._mask = np.ones(self.token_shape, dtype=bool)
            self._mask.setflags(write=False)
        return self._mask

    @property
    def recorded(self) -> bool:
        """Whether a graph was recorded (False under no_grad() or record=False)."""
        return self._graph.recorded

    @property
    def keeps(self) -> str:
        """What this record kept: ``"all"`` (every named value), ``"training"`` (only what a
        training step reads, ``forward(keep="training")``) or ``"sites"`` (an unrecorded forward:
        the residual sites, final norm output and logits)."""
        if not self._graph.recorded:
            return "sites"
        return "training" if self._graph.lean else "all"

    @property
    def embedding(self) -> GraphValue:
        """Embedding output, residual site 0."""
        return self._value(-1, _nodes.EMBEDDING)

    @property
    def final_norm_output(self) -> GraphValue:
        """Final RMSNorm output."""
        return self._value(-1, _nodes.FINAL_NORM_OUTPUT)

    @property
    def logits(self) -> GraphValue:
        """Tied-head logits [B, T, V]."""
        return self._value(-1, _nodes.LOGITS)

    @property
    def residual_sites(self) -> Tuple[GraphValue, ...]:
        """The 2L+1 residual sites in forward order: input, then after each addition."""
        sites = [self.embedding]
        for b in self.blocks:
            sites += [b.after_attention, b.output]
        return tuple(sites)

    def named(self, name: str) -> GraphValue:
        """A value by its full trace name, e.g. 'blocks.0.attention.weights' or 'logits'."""
        block, kind = _nodes.parse_name(name)
        if block >= self.model.config.layers:
            raise UnknownNameError(f"no recorded value is named {name!r}")
        if kind == _nodes.LOSS:
            return self.mean_loss
        return self._value(block, kind)

    def names(self) -> List[str]:
        """Trace names of the forward values, in evaluation order (loss excluded)."""
        out = ["embedding.output"]
        for b in range(self.model.config.layers):
            out += [f"blocks.{b}.{k}" for k in _nodes.BLOCK_KINDS]
        return [*out, "final_norm.output", "logits"]

    @property
    def mean_loss(self) -> GraphValue:
        """The attached mean loss; see loss()."""
        self._check_alive()
        if not self._graph.has_loss:
            raise AutodiffError("no loss is attached to this forward record; call loss(targets)")
        return self._value(-1, _nodes.LOSS)

    @property
    def per_target_nll(self) -> np.ndarray:
        """Each valid position's NLL in nats [B, T] (+0.0 at invalid positions), as summed
        into the mean loss; requires an attached loss."""
        self._check_alive()
        if not self._graph.has_loss:
            raise AutodiffError("no loss is attached to this forward record; call loss(targets)")
        nll = cast(np.ndarray, self._view(-1, _nodes.PER_TARGET_NLL))  # an attached loss always keeps it
        return nll.reshape(self.token_shape)

    def loss(self, targets: Any = None) -> GraphValue:
        """Attaches the valid-target mean next-token NLL (nats) and returns it as a GraphValue."""
        self._check_alive()
        if self._graph.has_loss:
            raise AutodiffError("this forward record already carries a loss")
        if targets is None:
            if self._batch_targets is None:
                raise TokenError("targets are required for a plain token array")
            shown, tg = self._batch_targets
        else:
            shown, tg = _targets_array(targets, self.token_shape)
        try:
            self._graph.attach_loss(tg.reshape(-1))
        except _status.CoreError as err:
            if err.code == LOSS_ATTACHED:  # another thread attached one meanwhile
                raise AutodiffError("this forward record already carries a loss") from None
            raise_core(err, token_shape=self.token_shape, ids=shown,
                       vocabulary_size=self.model.config.vocabulary_size, masked=self._mask is not None)
        return self._value(-1, _nodes.LOSS)

    def release(self) -> None:
        """Frees the recorded values (deferred while numpy views of them exist)."""
        self._graph.release()

    def __reduce__(self) -> tuple:
        raise TypeError("a ForwardRecord views a recorded graph in core memory and cannot be pickled "
                        "or copied; pickle the model, or copies of the values you need")


def _int_array(name: str, values: Any) -> np.ndarray:
    if type(values) is np.ndarray and values.dtype.kind in "iu":
        return values  # the common case: a plain integer array, nothing to convert or refuse
    arr = plain_array(name, values, TokenError)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and arr.size and np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr)):
            raise TokenError(f"{name} must have an integer dtype, got {arr.dtype}")
        raise TokenError(f"{name} must be integer ids, got dtype {arr.dtype}")
    return arr


def _tokens_array(tokens: Any, cfg: DecoderConfig) -> Tuple[np.ndarray, np.ndarray]:
    """The caller's ids [B, T] (kept for messages) and their int64 copy for the core, which
    checks the range (unsigned ids too large for int64 wrap to negative and are refused)."""
    arr = _int_array("tokens", tokens)
    if arr.ndim != 2:
        raise TokenError(f"tokens must have rank 2 [batch, tokens], got shape {arr.shape}")
    B, T = arr.shape
    if B == 0:
        raise TokenError("batch is 0")
    if T == 0:
        raise TokenError("sequence length is 0")
    if cfg.max_positions < T:
        raise TokenError(f"sequence length {T} exceeds max_positions {cfg.max_positions}")
    return arr, np.ascontiguousarray(arr, dtype=np.int64)


def _check_ids(shown: np.ndarray, ids: np.ndarray, vocabulary_size: int,
               valid: Optional[np.ndarray] = None, *, targets: bool = False) -> None:
    """The core's range refusal for ids [B, T] (int64, as the core reads them), worded like a
    forward's or a loss's, for code that runs no C model (the torch twin). ``shown`` holds the
    ids as the caller gave them; ``valid`` (uint8 [B*T]) limits the check to valid positions."""
    try:
        _layout.check_ids(ids, valid, vocabulary_size, targets)
    except _status.CoreError as err:
        raise_core(err, token_shape=ids.shape, ids=shown, vocabulary_size=vocabulary_size,
                   masked=valid is not None)


_INT64: np.dtype[np.int64] = np.dtype(np.int64)


def _ready_pair(tokens: Any, targets: Any, max_positions: int) -> bool:
    """Whether tokens and targets are arrays _tokens_array and _targets_array would hand the
    core unchanged: C-contiguous int64 ndarrays, tokens [B, T] with B > 0 and
    0 < T <= max_positions, targets [B, T] or [B * T]. Anything else goes through them."""
    if type(tokens) is not np.ndarray or type(targets) is not np.ndarray:
        return False
    if tokens.dtype is not _INT64 or targets.dtype is not _INT64:
        return False
    shape = tokens.shape
    if len(shape) != 2 or not shape[0] or not 0 < shape[1] <= max_positions:
        return False
    tshape = targets.shape
    if tshape != shape and tshape != (shape[0] * shape[1],):
        return False
    return tokens.flags.c_contiguous and targets.flags.c_contiguous


def _targets_array(targets: Any, shape: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
    """The caller's targets reshaped to [B, T] (kept for messages) and their int64 copy; the
    core checks the range at valid positions."""
    arr = _int_array("targets", targets)
    B, T = shape
    if arr.size != B * T:
        raise TokenError(f"expected {B * T} targets for token shape {shape}, got {arr.size}")
    if arr.ndim not in (1, 2) or (arr.ndim == 2 and arr.shape != shape):
        raise TokenError(f"targets must have shape {shape}, got {arr.shape}")
    if arr.shape != shape:
        arr = arr.reshape(B, T)
    return arr, np.ascontiguousarray(arr, dtype=np.int64)


class DecoderModel:
    """A pre-norm decoder (RMSNorm, RoPE attention, SwiGLU, tied head) over C-owned float64
    parameters. Forward, loss and gradients are bit-identical to the reference core.

    ``branch_multipliers`` (one positive finite number for every block, or one per block;
    default none) multiplies each block's two residual branches in the forward and their
    adjoints in the reverse pass (docs/numerics.md §5.9); it is fixed for the model's life."""

    def __init__(self, config: DecoderConfig, rng: SplitMix64, *, branch_multipliers: Any = None) -> None:
        if not isinstance(config, DecoderConfig):
            raise ArgumentTypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
        if not isinstance(rng, SplitMix64):
            raise ArgumentTypeError(f"rng must be a pydepth.SplitMix64, got {type(rng).__name__}")
        branch = branch_tuple(config.layers, branch_multipliers, ParametrizationError)
        _check_allocatable(config)
        layout = config.parameter_layout()
        try:
            raw = [_graph._Param(shape) for _, shape in layout]
            _graph.draw_parameters(config._core_tuple(), raw, rng)
        except _status.CoreError as err:
            raise_core(err)
        except MemoryError:
            raise AllocationError(f"cannot allocate {config.parameter_count} parameters "
                                  f"({config.parameter_count * 8} bytes)") from None
        self._setup(config, [NamedParameter._wrap(n, p) for (n, _), p in zip(layout, raw)], branch)

    @classmethod
    def from_parameters(cls, config: DecoderConfig, parameters: Sequence[NamedParameter], *,
                        branch_multipliers: Any = None) -> DecoderModel:
        """Assembles a model from an exact parameter list (shared, not copied), after checking
        count, names, order, shapes and finiteness; nothing is built when a check fails.
        ``branch_multipliers`` as in the constructor."""
        if not isinstance(config, DecoderConfig):
            raise ArgumentTypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
        branch = branch_tuple(config.layers, branch_multipliers, ParametrizationError)
        validate_parameter_layout(config, parameters)
        self = cls.__new__(cls)
        self._setup(config, list(parameters), branch)
        return self

    def clone(self) -> DecoderModel:
        """An independent model with this configuration and copies of this model's parameter
        values: same names and bits, zero gradients, nothing drawn. The same-base unscaled
        control of a depth initialization is ``fresh.base_model.clone()``."""
        return DecoderModel.from_parameters(self._config, [NamedParameter(p.name, p.value) for p in self._parameters],
                                            branch_multipliers=self._branch)

    def _setup(self, config: DecoderConfig, params: List[NamedParameter],
               branch: Optional[Tuple[float, ...]] = None) -> None:
        self._config = config
        self._parameters = tuple(params)
        self._by_name = {p.name: p for p in params}
        self._branch = branch
        try:
            self._core = _graph._Model(config._core_tuple(), [p._p for p in params], branch)
        except _status.CoreError as err:
            raise_core(err)
        self._plan = _step._StepPlan(self._core)  # train_step's graph, planned on its first step
        # the last optimizer whose parameters train_step found all to be this model's (weakly: a
        # model keeps no optimizer's slots alive)
        self._stepper: Optional[weakref.ref[Any]] = None

    @property
    def branch_multipliers(self) -> Tuple[float, ...]:
        """Each block's residual-branch multiplier μ (docs/numerics.md §5.9): the block adds
        ``μ·A(x)`` and ``μ·F(m)``; 1.0 (the default) is no multiply at all."""
        return self._branch if self._branch is not None else (1.0,) * self._config.layers

    @property
    def config(self) -> DecoderConfig:
        """The model's configuration."""
        return self._config

    @property
    def parameters(self) -> Tuple[NamedParameter, ...]:
        """Parameters in declaration order."""
        return self._parameters

    def parameter(self, name: str) -> NamedParameter:
        """The parameter with this name (KeyError when there is none)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownNameError(f"model has no parameter named {name!r}") from None

    @property
    def parameter_count(self) -> int:
        """Total stored scalars."""
        return sum(p.size for p in self._parameters)

    def zero_grad(self) -> None:
        """Resets every accumulated gradient to +0.0 (values and revisions unchanged)."""
        self._core.zero_grads()

    def named_parameters(self) -> Tuple[Tuple[str, NamedParameter], ...]:
        """(name, parameter) pairs in declaration order."""
        return tuple((p.name, p) for p in self._parameters)

    def state_dict(self) -> Dict[str, np.ndarray]:
        """Name -> writable float64 copy of the values, in declaration order, all taken between
        two whole updates (an optimizer step on another thread never shows half done)."""
        copies = [np.empty(p.shape) for p in self._parameters]
        _graph.copy_values([p._p for p in self._parameters], [c.reshape(-1) for c in copies])
        return {p.name: c for p, c in zip(self._parameters, copies)}

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> LoadResult:
        """Assigns values by name after checking every entry (shape, real dtype, finiteness);
        strict=True also refuses missing and unexpected names. Nothing changes on refusal."""
        arrays, missing, unexpected = _checked_state(self._config, state, strict)
        # every value at once: a forward on another thread sees the old state or the new one
        _graph.assign_all([self._by_name[n]._p for n in arrays],
                          [np.ascontiguousarray(a, dtype=np.float64).reshape(-1) for a in arrays.values()])
        return LoadResult(tuple(missing), tuple(unexpected))

    @classmethod
    def from_state_dict(cls, config: DecoderConfig, state: Mapping[str, Any], *,
                        branch_multipliers: Any = None) -> DecoderModel:
        """A model with exactly the entries of state (any order; copied), checked against
        config's layout; nothing is drawn. ``branch_multipliers`` as in the constructor."""
        if not isinstance(config, DecoderConfig):
            raise ArgumentTypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
        branch = branch_tuple(config.layers, branch_multipliers, ParametrizationError)
        arrays, _, _ = _checked_state(config, state, True)
        return cls.from_parameters(config, [NamedParameter(n, arrays[n]) for n, _ in config.parameter_layout()],
                                   branch_multipliers=branch)

    def __reduce__(self) -> tuple:
        if self._branch is None:  # the same pickle as before multipliers existed
            return (DecoderModel.from_parameters, (self._config, list(self._parameters)))
        return (_model_with_branch, (self._config, list(self._parameters), self._branch))

    def _layout(self, source: Any) -> Tuple[Any, ...]:
        cfg = self._config
        if isinstance(source, Batch):
            ids, valid, pos, seg = source._core_layout(cfg)
            targets = (source.targets, source._core_targets())
            return source.tokens, ids, valid, pos, seg, source.valid.copy(), targets
        shown, ids = _tokens_array(source, cfg)
        return shown, ids, None, None, None, None, None

    def forward(self, tokens: Any, *, record: Optional[bool] = None, keep: str = "all") -> ForwardRecord:
        """Runs the decoder on token ids [B, T] (or a pydepth.Batch).

        ``record`` chooses whether the graph of intermediate values is kept for ``backward``
        (default: True outside :func:`no_grad`); with ``record=False`` the same bits are
        computed and only the residual sites, final norm output and logits are kept. Either way
        the result is a :class:`ForwardRecord`.

        ``keep`` says what a recorded graph keeps: ``"all"`` (every named value) or
        ``"training"`` (a training step's memory: only the values the reverse pass and the
        residual-health observer read — the residual sites, norm outputs and statistics, rotated
        queries and keys, values, attention weights, merged heads, the two branch outputs, gate
        and up projections and the final norm output; the probabilities are written over the
        logits). Every kept value, the loss, the gradients, every adjoint and a health report
        are the same bits in both modes; reading a value that was not kept raises
        :class:`pydepth.errors.ValueNotKeptError`."""
        if record is not None and not isinstance(record, (bool, np.bool_)):
            raise ArgumentTypeError(f"record must be True, False or None, got {record!r}")
        mode = _KEEP_MODES.get(keep) if isinstance(keep, str) else None
        if mode is None:
            raise ArgumentTypeError(f"keep must be one of {sorted(_KEEP_MODES)}, got {keep!r}")
        rec = _local.recording if record is None else bool(record)
        if mode == _RECORD_TRAINING and not rec:
            why = "record=False" if record is not None else "no_grad()"
            raise ArgumentTypeError(f"keep='training' says what a recorded graph keeps; this forward "
                                    f"records nothing ({why})")
        shown, ids, valid, pos, seg, mask, targets = self._layout(tokens)
        try:
            graph = _graph._Graph(self._core, ids, valid, pos, seg, mode if rec else _RECORD_NONE)
        except _status.CoreError as err:
            raise_core(err, token_shape=ids.shape, ids=shown, vocabulary_size=self._config.vocabulary_size,
                       masked=mask is not None)
        return ForwardRecord(self, graph, ids.shape, mask, targets)

    def loss(self, source: Any, targets: Any = None, *, record: Optional[bool] = None,
             keep: str = "all") -> GraphValue:
        """Mean next-token cross entropy in nats over valid targets. source is token ids with
        targets, a pydepth.Batch (its own targets), or a ForwardRecord of this model (then
        ``record`` and ``keep`` are the record's own); ``keep`` as in :meth:`forward`."""
        if isinstance(source, ForwardRecord):
            if source.model is not self:
                raise ForeignRecordError("the forward record was produced by another model")
            return source.loss(targets)
        fwd = self.forward(source, record=record, keep=keep)
        return fwd.loss(targets)

    def train_step(self, tokens: Any, targets: Any = None, *, optimizer: Any = None) -> float:
        """One training step in one call into the core; returns the mean loss as a float.

        The same bits as ``zero_grad()``, ``forward(tokens, keep="training").loss(targets)``,
        ``backward()``, ``item()`` and, with ``optimizer`` (a :class:`pydepth.optim.Optimizer`
        over parameters of this model), ``optimizer.step()``: loss, every gradient, every
        parameter and optimizer slot. ``tokens`` and ``targets`` as in :meth:`loss` (a
        :class:`pydepth.Batch` brings its own targets). The step's graph is planned on the first
        step of a batch shape and reused by the next steps of that shape (kept with the model,
        freed with it); no value of it is handed out. The step holds the model's lock from the
        forward to the update, so concurrent steps run one at a time.

        Bad tokens, targets or optimizer raise what those calls raise and change nothing. A
        refusal in the reverse pass (a non-finite adjoint) leaves the gradients at +0.0, as
        ``zero_grad()`` then the refused ``backward()`` do; a refused optimizer update leaves
        the gradients of the step and no value or slot changed. Ctrl-C stops the step between
        blocks of its passes or at its final poll before the update (gradients untouched in the
        forward, else +0.0, nothing updated); the update itself runs whole. Inside
        :func:`no_grad` the step is refused (it records a graph)."""
        if not _local.recording:
            raise ArgumentTypeError("train_step records a training graph; it cannot run inside no_grad()")
        opt = None if optimizer is None else self._own_optimizer(optimizer)
        if _ready_pair(tokens, targets, self._config.max_positions):  # the checks below would pass it as is
            ids, tg, valid, pos, seg, shown_pair = tokens, targets, None, None, None, (tokens, targets)
        else:
            shown, ids, valid, pos, seg, _, batch_targets = self._layout(tokens)
            if targets is None:
                if batch_targets is None:
                    raise TokenError("targets are required for a plain token array")
                shown_targets, tg = batch_targets
            else:
                shown_targets, tg = _targets_array(targets, ids.shape)
            shown_pair = (shown, shown_targets)
        if opt is None:
            return self._run_step(ids, tg, valid, pos, seg, shown_pair, None)
        with opt._turn("train_step()"):
            loss = self._run_step(ids, tg, valid, pos, seg, shown_pair, opt)
            opt._step += 1
        return loss

    def _own_optimizer(self, optimizer: Any) -> Any:
        """optimizer, once checked to be an Optimizer whose every parameter is this model's."""
        known = self._stepper
        if known is not None and known() is optimizer:  # its parameter tuple is fixed for its life
            return optimizer
        if not callable(getattr(type(optimizer), "_step_update", None)):  # pydepth.optim.Optimizer (it imports us)
            raise ArgumentTypeError(f"optimizer must be a pydepth.optim.Optimizer, got {type(optimizer).__name__}")
        for p in optimizer.parameters:
            if self._by_name.get(p.name) is not p:
                raise OptimizerStateError(f"the optimizer updates parameter {p.name!r}, which is not this "
                                         "model's; train_step steps only an optimizer of this model")
        self._stepper = weakref.ref(optimizer)
        return optimizer

    def _run_step(self, ids: np.ndarray, tg: np.ndarray, valid: Any, pos: Any, seg: Any,
                  shown: Tuple[np.ndarray, np.ndarray], opt: Any) -> float:
        """The core step, its refusal worded as the call of the stage that stopped would word it;
        tg holds the B*T targets in any shape, shown the caller's arrays for the messages."""
        update = None if opt is None else opt._step_update()
        step = 0 if opt is None else opt._step + 1
        try:
            return self._plan.run(ids, tg, valid, pos, seg, update, step)
        except _status.CoreError as err:
            stage = getattr(err, "stage", _step.STAGE_FORWARD)
            if stage == _step.STAGE_UPDATE:
                opt._raise(err)
            if stage == _step.STAGE_BACKWARD:
                raise_core(err, param_names=[p.name for p in self._parameters])
            raise_core(err, token_shape=ids.shape, ids=shown[stage == _step.STAGE_LOSS].reshape(ids.shape),
                       vocabulary_size=self._config.vocabulary_size, masked=valid is not None)

    def __repr__(self) -> str:
        c = self._config
        return (f"DecoderModel(layers={c.layers}, width={c.model_width}, heads={c.heads}, "
                f"kv_heads={c.kv_heads}, parameters={self.parameter_count})")


def _model_with_branch(config: DecoderConfig, parameters: List[NamedParameter],
                       branch: Tuple[float, ...]) -> DecoderModel:
    """Unpickles a model built with branch multipliers."""
    return DecoderModel.from_parameters(config, parameters, branch_multipliers=branch)


class LoadResult(NamedTuple):
    """What load_state_dict(strict=False) left out: layout names without an entry, and entries
    the layout does not have."""

    missing: Tuple[str, ...]
    unexpected: Tuple[str, ...]


def _checked_state(config: DecoderConfig, state: Any,
                   strict: bool) -> Tuple[Dict[str, np.ndarray], List[str], List[str]]:
    """Float64 copies of the entries config's layout names, after every check."""
    if not isinstance(state, Mapping):
        raise StateDictError(f"a state dict must be a mapping of name to array, got {type(state).__name__}")
    layout = dict(config.parameter_layout())
    missing = [n for n in layout if n not in state]
    unexpected = [str(k) for k in state if k not in layout]
    if strict and (missing or unexpected):
        raise StateDictError(f"state dict does not match the layout: missing {missing}, unexpected {unexpected}")
    out: Dict[str, np.ndarray] = {}
    for name, shape in layout.items():
        if name not in state:
            continue
        arr = plain_array(name, state[name], StateDictError)
        if arr.dtype.kind not in "iuf":
            raise StateDictError(f"{name}: needs real numbers, got dtype {arr.dtype}")
        if arr.shape != shape:
            raise StateDictError(f"{name}: expected shape {shape}, got {arr.shape}")
        arr = np.array(arr, dtype=np.float64, order="C")
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise StateDictError(f"{name}: non-finite value {float(arr.flat[bad[0]])!r} at flat index {bad[0]}")
        out[name] = arr
    return out, missing, unexpected


# Python objects per parameter tensor (two wrappers, a name, a layout entry), in float64 units
_TENSOR_OVERHEAD = 64


def _check_allocatable(config: DecoderConfig) -> None:
    """Refuses in O(1), before anything proportional to the layer count is built, a model whose
    values, gradients and RoPE tables cannot be allocated now."""
    need = (2 * config.parameter_count + config.max_positions * config.head_width
            + _TENSOR_OVERHEAD * config.parameter_tensor_count)
    if need >= 2**61 or not _graph.can_allocate(need):
        raise AllocationError(
            f"cannot allocate {config.parameter_count} parameters in {config.parameter_tensor_count} "
            f"tensors ({config.layers} layers) with their gradients and RoPE tables for "
            f"max_positions {config.max_positions}: {need * 8} bytes")


def validate_parameter_layout(config: DecoderConfig, parameters: Sequence[NamedParameter]) -> None:
    """Checks count, names in order, shapes and finiteness against config's layout."""
    params = list(parameters)
    if len(params) != config.parameter_tensor_count:  # before building the O(layers) layout
        raise ParameterLayoutError(f"expected {config.parameter_tensor_count} parameter tensors "
                                   f"(9*layers+2), got {len(params)}")
    layout = config.parameter_layout()
    seen = set()
    for i, (p, (name, shape)) in enumerate(zip(params, layout)):
        if not isinstance(p, NamedParameter):
            raise ParameterLayoutError(f"parameter {i} must be a NamedParameter, got {type(p).__name__}")
        if p.name in seen:
            raise ParameterNameError(f"duplicate parameter name {p.name!r} at index {i}")
        seen.add(p.name)
        if p.name != name:
            raise ParameterLayoutError(f"parameter {i} must be named {name!r}, got {p.name!r}")
        if p.shape != shape:
            raise ParameterLayoutError(f"{name}: expected shape {shape}, got {p.shape}")
    for p in params:
        bad = np.flatnonzero(~np.isfinite(p.value))
        if bad.size:
            raise ParameterLayoutError(f"{p.name}: non-finite value {p.value.flat[bad[0]]!r} at flat index {bad[0]}")
