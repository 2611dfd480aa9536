# SPDX-License-Identifier: MIT
"""Checkpoints as safetensors files: float64 parameters under their pydepth names, optimizer
slots under ``optimizer.{name}.{slot}``, and a ``pydepth`` JSON metadata entry (config,
construction record, generator state, step, optimizer hyperparameters, versions).

Writes are atomic (temporary file, fsync, rename); loads check everything before building
anything and raise a typed CheckpointError on any defect."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ._files import container
from ._files.atomic import write_atomically
from ._native._rng import SplitMix64
from .config import DecoderConfig
from .depth_init import DepthInitializationRecord, DepthInitializedDecoder
from .errors import (ArgumentTypeError, CheckpointError, CheckpointFormatError, CheckpointMismatchError,
                     CheckpointVersionError, ConfigError, OptimizerError, OptimizerStateError, ParametrizationError,
                     PydepthError, StateDictError)
from .model import DecoderModel
from . import optim
from ._version import __version__

#: Layout of the file and of the ``pydepth`` metadata entry; bump on any incompatible change.
CHECKPOINT_FORMAT = 1
#: Version of the numerics contract (docs/numerics*.md) the stored bits were produced under.
NUMERICS_CONTRACT_VERSION = 1

_OPTIMIZER_PREFIX = "optimizer."
_META_KEYS = {"checkpoint_format", "numerics_contract", "pydepth_version", "config", "record",
              "rng_state", "step", "optimizer", "extra"}
#: Written only by a model with residual-branch multipliers, so every other checkpoint keeps its bytes.
_OPTIONAL_META_KEYS = {"branch_multipliers"}

__all__ = ["Checkpoint", "save", "load", "CHECKPOINT_FORMAT", "NUMERICS_CONTRACT_VERSION"]


@dataclass(frozen=True)
class Checkpoint:
    """What load() read: a fresh model, the optimizer's state_dict() (None when none was saved),
    the generator, the construction record, the step, the caller's extra JSON, and versions."""

    model: DecoderModel
    optimizer_state: Optional[Dict[str, Any]]
    rng: Optional[SplitMix64]
    record: Optional[DepthInitializationRecord]
    step: Optional[int]
    extra: Any
    pydepth_version: str
    contract_version: int

    @property
    def config(self) -> DecoderConfig:
        """The model's configuration."""
        return self.model.config

    def optimizer(self) -> optim.Optimizer:
        """A new optimizer of the saved kind over self.model's parameters, in the saved state."""
        if self.optimizer_state is None:
            raise CheckpointError("this checkpoint holds no optimizer state")
        return _rebuild_optimizer(self.model, self.optimizer_state)


def _pydepth_version() -> str:
    return __version__


def _path(path: Any) -> str:
    """The file name of a path argument, refused typed when it is neither str nor os.PathLike of str."""
    name = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(name, str):
        raise ArgumentTypeError(f"path must be a str or an os.PathLike of str, got {type(path).__name__} "
                                f"{str(path)[:80]!r}")
    return name


def save(path: Union[str, os.PathLike[str]], model: Union[DecoderModel, DepthInitializedDecoder], *,
         optimizer: Optional[optim.Optimizer] = None, rng: Optional[SplitMix64] = None,
         record: Optional[DepthInitializationRecord] = None, step: Optional[int] = None,
         extra: Any = None) -> None:
    """Writes model (and optionally the optimizer, generator, record, step and JSON extra) to
    path atomically: a crash mid-write never leaves a partial file under path."""
    path = _path(path)
    if isinstance(model, DepthInitializedDecoder):
        record = model.record if record is None else record
        model = model.model
    if not isinstance(model, DecoderModel):
        raise ArgumentTypeError(f"model must be a DecoderModel or DepthInitializedDecoder, got {type(model).__name__}")
    tensors = {p.name: p.snapshot() for p in model.parameters}
    meta: Dict[str, Any] = {"checkpoint_format": CHECKPOINT_FORMAT, "numerics_contract": NUMERICS_CONTRACT_VERSION,
                            "pydepth_version": _pydepth_version(), "config": model.config.to_dict(),
                            "record": None, "rng_state": None, "step": None, "optimizer": None, "extra": None}
    if record is not None:
        if not isinstance(record, DepthInitializationRecord):
            raise ArgumentTypeError(f"record must be a DepthInitializationRecord, got {type(record).__name__}")
        if record.config != model.config:
            raise CheckpointMismatchError(f"record configuration {record.config} differs from the model's "
                                          f"{model.config}")
        meta["record"] = record.to_dict()
    if rng is not None:
        if not isinstance(rng, SplitMix64):
            raise ArgumentTypeError(f"rng must be a pydepth.SplitMix64, got {type(rng).__name__}")
        meta["rng_state"] = str(rng.state)
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise CheckpointError(f"step must be a non-negative int, got {step!r}")
        meta["step"] = step
    if optimizer is not None:
        meta["optimizer"] = _optimizer_meta(model, optimizer, tensors)
    meta["extra"] = extra
    if any(mu != 1.0 for mu in model.branch_multipliers):
        meta["branch_multipliers"] = list(model.branch_multipliers)
    blob = _encode(tensors, meta)
    write_atomically(os.fspath(path), lambda fh: fh.write(blob))


def _encode(tensors: Dict[str, np.ndarray], meta: Dict[str, Any]) -> bytes:
    try:
        text = json.dumps(meta, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"checkpoint metadata is not plain JSON (extra={str(meta['extra'])[:80]!r}): "
                              f"{err}") from None
    except RecursionError:
        raise CheckpointError("checkpoint extra nests too deeply to be stored as JSON") from None
    blob = container.encode(tensors, {"pydepth": text}) if len(text) <= container.MAX_HEADER_BYTES else b""
    if not blob or container.header_length(blob) > container.MAX_HEADER_BYTES:
        raise CheckpointError(f"checkpoint metadata of {len(text)} bytes (extra: {len(json.dumps(meta['extra']))} "
                              f"bytes) exceeds the {container.MAX_HEADER_BYTES}-byte header limit of safetensors")
    return blob


def _optimizer_meta(model: DecoderModel, optimizer: optim.Optimizer, tensors: Dict[str, np.ndarray]) -> Dict[str, Any]:
    if not isinstance(optimizer, optim.Optimizer):
        raise ArgumentTypeError(f"optimizer must be a pydepth.optim optimizer, got {type(optimizer).__name__}")
    if len(optimizer.parameters) != len(model.parameters) or any(
            a is not b for a, b in zip(optimizer.parameters, model.parameters)):
        raise CheckpointMismatchError("the optimizer must update exactly this model's parameters, in order")
    state = optimizer.state_dict()
    if callable(state["hyperparameters"]["lr"]):
        raise CheckpointError(f"the learning-rate schedule {state['hyperparameters']['lr']!r} has no to_dict(); "
                              "a checkpoint stores constant rates and pydepth.optim.WarmupCosine")
    for name, slots in state["slots"].items():
        for slot, arr in slots.items():
            tensors[f"{_OPTIMIZER_PREFIX}{name}.{slot}"] = arr
    return {"optimizer": state["optimizer"], "hyperparameters": state["hyperparameters"],
            "step": state["step"], "slots": list(optimizer.slot_names)}


def load(path: Union[str, os.PathLike[str]]) -> Checkpoint:
    """Reads a checkpoint written by save(); the header is checked from the file's first bytes
    and every part against the config before a tensor is read or the model built."""
    name = path = _path(path)
    plan: Dict[str, Any] = {}

    def select(header: container.Header) -> List[str]:
        plan.update(_plan(name, header))
        return [*plan["parameters"], *plan["slots"]]
    _, tensors = container.read(name, _entry_cap, select)
    meta, config = plan["meta"], plan["config"]
    try:
        model = DecoderModel.from_state_dict(config, {n: tensors[n] for n in plan["parameters"]},
                                             branch_multipliers=meta.get("branch_multipliers"))
    except (StateDictError, ParametrizationError) as err:
        raise CheckpointFormatError(f"{path}: {err}") from None
    optimizer_state = _optimizer_state(path, model, tensors, meta["optimizer"])
    record = _record(path, config, meta["record"])
    rng = _rng(path, meta["rng_state"])
    step = meta["step"]
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise CheckpointFormatError(f"{path}: metadata step must be a non-negative integer or null, got {step!r}")
    if step is not None and optimizer_state is not None and optimizer_state["step"] != step:
        raise CheckpointMismatchError(f"{path}: metadata step {step} disagrees with the optimizer's step "
                                      f"{optimizer_state['step']}; a resume would count steps its updates never took")
    return Checkpoint(model, optimizer_state, rng, record, step, meta["extra"], meta["pydepth_version"],
                      meta["numerics_contract"])


def _entry_cap(metadata: Mapping[str, Any], data_len: int) -> int:
    """How many tensors a header whose metadata is ``metadata`` may list: what its config needs
    (parameters and up to two optimizer slots each), and never more than the data could hold,
    every pydepth tensor having at least one element."""
    try:
        meta = json.loads(metadata["pydepth"])
        config = DecoderConfig.from_dict(meta["config"])
        needed = 3 * config.parameter_tensor_count
    except Exception:  # malformed metadata is refused, named, by the checks after the header
        needed = container.PRE_METADATA_OBJECTS
    return min(needed, data_len // 8) + 1


def _plan(path: str, header: container.Header) -> Dict[str, Any]:
    """The metadata, config and the names of the tensors to read, every name and shape checked."""
    meta = _read_metadata(header.metadata, path)
    try:
        config = DecoderConfig.from_dict(meta["config"]) if isinstance(meta["config"], Mapping) else None
    except ConfigError as err:
        raise CheckpointFormatError(f"{path}: metadata config is invalid: {err}") from None
    if config is None:
        raise CheckpointFormatError(f"{path}: metadata config must be an object, got {str(meta['config'])[:80]}")
    shapes = {n: shape for n, (shape, _, _) in header.entries.items()}
    _check_claim(path, config, shapes, meta["optimizer"])
    return {"meta": meta, "config": config, "parameters": _parameter_names(path, config, shapes, meta["optimizer"]),
            "slots": _slot_names(path, config, shapes, meta["optimizer"])}


def _read_metadata(metadata: Mapping[str, str], path: str) -> Dict[str, Any]:
    text = metadata.get("pydepth")
    if not isinstance(text, str):
        raise CheckpointFormatError(f"{path}: __metadata__ has no 'pydepth' entry; not a pydepth checkpoint")
    try:
        meta = json.loads(text)
    except ValueError:
        raise CheckpointFormatError(f"{path}: the pydepth metadata entry is not JSON: {text[:60]!r}") from None
    except RecursionError:
        raise CheckpointFormatError(f"{path}: the pydepth metadata entry nests JSON too deeply") from None
    if not isinstance(meta, dict):
        raise CheckpointFormatError(f"{path}: the pydepth metadata must be a JSON object, got {type(meta).__name__}")
    for key, ours in (("checkpoint_format", CHECKPOINT_FORMAT), ("numerics_contract", NUMERICS_CONTRACT_VERSION)):
        v = meta.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise CheckpointFormatError(f"{path}: metadata {key} must be a positive integer, got {v!r}")
        if v > ours:
            raise CheckpointVersionError(f"{path}: written under {key} {v}; this pydepth "
                                         f"{_pydepth_version()} reads up to {ours}")
    if not _META_KEYS <= set(meta) <= _META_KEYS | _OPTIONAL_META_KEYS:
        raise CheckpointFormatError(f"{path}: metadata keys: missing {sorted(_META_KEYS - set(meta))}, "
                                    f"unknown {sorted(set(meta) - _META_KEYS - _OPTIONAL_META_KEYS)}")
    branch = meta.get("branch_multipliers", [])
    if not isinstance(branch, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in branch):
        raise CheckpointFormatError(f"{path}: metadata branch_multipliers must be a list of numbers, "
                                    f"got {str(branch)[:80]}")
    if not isinstance(meta["pydepth_version"], str):
        raise CheckpointFormatError(f"{path}: metadata pydepth_version must be a string")
    return meta


def _check_claim(path: Any, config: DecoderConfig, tensors: Mapping[str, Any], opt_meta: Any) -> None:
    """Refuses a config claiming far more parameter tensors than the file holds, from arithmetic
    alone, so the claim's layout is only ever built at a size bounded by the file's."""
    held = sum(1 for k in tensors if not (opt_meta is not None and k.startswith(_OPTIMIZER_PREFIX)))
    claimed = config.parameter_tensor_count
    if claimed > 2 * held + 16:  # within this margin the per-name checks below name what is missing
        raise CheckpointMismatchError(f"{path}: the config ({config.layers} layers) needs {claimed} parameter "
                                      f"tensors; the file holds {held}")


def _parameter_names(path: Any, config: DecoderConfig, shapes: Mapping[str, Tuple[int, ...]],
                     opt_meta: Any) -> List[str]:
    layout = config.parameter_layout()
    names = {n for n, _ in layout}
    for name, shape in layout:
        if name not in shapes:
            raise CheckpointFormatError(f"{path}: tensor {name!r} is missing")
        if shapes[name] != shape:
            raise CheckpointMismatchError(f"{path}: tensor {name!r} has shape {shapes[name]}; the config "
                                          f"({config.to_dict()}) needs {shape}")
    stray = sorted(k for k in shapes
                   if k not in names and not (opt_meta is not None and k.startswith(_OPTIMIZER_PREFIX)))
    if stray:
        raise CheckpointFormatError(f"{path}: unexpected tensors {stray[:5]}")
    return [n for n, _ in layout]


def _slot_names(path: Any, config: DecoderConfig, shapes: Mapping[str, Tuple[int, ...]], opt_meta: Any) -> List[str]:
    if opt_meta is None:
        return []
    keys = {"optimizer", "hyperparameters", "step", "slots"}
    if not isinstance(opt_meta, dict) or set(opt_meta) != keys or not isinstance(opt_meta["slots"], list):
        raise CheckpointFormatError(f"{path}: metadata optimizer must be an object with keys {sorted(keys)}")
    names = opt_meta["slots"]
    if len(names) > 2 or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise CheckpointFormatError(f"{path}: metadata optimizer slots must be distinct slot names, "
                                    f"got {str(names)[:80]}")
    expected = []
    for name, shape in config.parameter_layout():
        for slot in names:
            key = f"{_OPTIMIZER_PREFIX}{name}.{slot}"
            expected.append(key)
            if key not in shapes:
                raise CheckpointFormatError(f"{path}: optimizer tensor {key!r} is missing")
            if shapes[key] != shape:
                raise CheckpointFormatError(f"{path}: optimizer tensor {key!r} must be float64 of shape "
                                            f"{shape}, got float64 {shapes[key]}")
    stray = sorted(set(k for k in shapes if k.startswith(_OPTIMIZER_PREFIX)) - set(expected))
    if stray:
        raise CheckpointFormatError(f"{path}: unexpected optimizer tensors {stray[:5]}")
    return expected


def _optimizer_state(path: Any, model: DecoderModel, tensors: Mapping[str, np.ndarray],
                     opt_meta: Any) -> Optional[Dict[str, Any]]:
    if opt_meta is None:
        return None
    slots = {p.name: {slot: np.array(tensors[f"{_OPTIMIZER_PREFIX}{p.name}.{slot}"]) for slot in opt_meta["slots"]}
             for p in model.parameters}
    state = {"optimizer": opt_meta["optimizer"], "hyperparameters": opt_meta["hyperparameters"],
             "step": opt_meta["step"], "parameters": [p.name for p in model.parameters], "slots": slots}
    try:
        _rebuild_optimizer(model, state)  # every check the optimizer makes, on a throwaway
    except (OptimizerError, TypeError) as err:
        raise CheckpointMismatchError(f"{path}: optimizer state does not load: {err}") from None
    return state


def _rebuild_optimizer(model: DecoderModel, state: Mapping[str, Any]) -> optim.Optimizer:
    kinds = {"SGD": optim.SGD, "AdamW": optim.AdamW}
    kind = kinds.get(str(state.get("optimizer")))
    if kind is None:
        raise OptimizerStateError(f"unknown optimizer {state.get('optimizer')!r}; known {sorted(kinds)}")
    hyper = state.get("hyperparameters")
    if not isinstance(hyper, Mapping):
        raise OptimizerStateError(f"optimizer hyperparameters must be an object, got {hyper!r}")
    opt = kind(model.parameters, **dict(hyper))
    opt.load_state_dict(state)
    return opt


def _record(path: Any, config: DecoderConfig, d: Any) -> Optional[DepthInitializationRecord]:
    if d is None:
        return None
    try:
        record = DepthInitializationRecord.from_dict(d)
    except (PydepthError, ValueError, TypeError) as err:
        raise CheckpointFormatError(f"{path}: metadata record is invalid: {err}") from None
    if record.config != config:
        raise CheckpointMismatchError(f"{path}: the record's configuration {record.config} differs from "
                                      f"the checkpoint's {config}")
    return record


def _rng(path: Any, s: Any) -> Optional[SplitMix64]:
    if s is None:
        return None
    # the length first: int() of a string of thousands of digits refuses (or takes quadratic time)
    if not isinstance(s, str) or len(s) > 20 or not re.fullmatch(r"0|[1-9][0-9]*", s) or int(s) >= 2**64:
        raise CheckpointFormatError(f"{path}: metadata rng_state must be a decimal string in [0, 2**64), got {s!r}")
    return SplitMix64(int(s))
