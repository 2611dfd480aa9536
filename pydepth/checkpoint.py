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
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from ._files import container
from ._files.atomic import write_atomically
from ._native._rng import SplitMix64
from .config import DecoderConfig
from .depth_init import DepthInitializationRecord, DepthInitializedDecoder
from .errors import (ArgumentTypeError, CheckpointError, CheckpointFormatError, CheckpointMismatchError,
                     CheckpointVersionError, ConfigError, OptimizerError, OptimizerStateError, PydepthError,
                     StateDictError)
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
    header = _encode_header(tensors, meta)

    def write(fh: Any) -> None:
        fh.write(header)
        for chunk in container.tensor_bytes(tensors):
            fh.write(chunk)
    write_atomically(path, write)


def _encode_header(tensors: Dict[str, np.ndarray], meta: Dict[str, Any]) -> bytes:
    try:
        text = json.dumps(meta, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"checkpoint metadata is not plain JSON (extra={str(meta['extra'])[:80]!r}): "
                              f"{err}") from None
    except RecursionError:
        raise CheckpointError("checkpoint extra nests too deeply to be stored as JSON") from None
    header = container.encode_header(tensors, {"format": "pt", "pydepth": text})
    if len(header) - 8 > container.MAX_HEADER_BYTES:
        raise CheckpointError(f"checkpoint metadata of {len(text)} bytes (extra: {len(json.dumps(meta['extra']))} "
                              f"bytes) exceeds the {container.MAX_HEADER_BYTES}-byte header limit of safetensors")
    return header


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
    """Reads a checkpoint written by save(); every part is checked before the model is built."""
    path = _path(path)
    file = container.parse(container.read_regular_file(path), path)
    meta = _read_metadata(file.metadata, path)
    tensors = file.tensors
    try:
        config = DecoderConfig.from_dict(meta["config"]) if isinstance(meta["config"], Mapping) else None
    except ConfigError as err:
        raise CheckpointFormatError(f"{path}: metadata config is invalid: {err}") from None
    if config is None:
        raise CheckpointFormatError(f"{path}: metadata config must be an object, got {str(meta['config'])[:80]}")
    _check_claim(path, config, tensors, meta["optimizer"])
    params = _parameter_tensors(path, config, tensors, meta["optimizer"])
    try:
        model = DecoderModel.from_state_dict(config, params)
    except StateDictError as err:
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
    if set(meta) != _META_KEYS:
        raise CheckpointFormatError(f"{path}: metadata keys: missing {sorted(_META_KEYS - set(meta))}, "
                                    f"unknown {sorted(set(meta) - _META_KEYS)}")
    if not isinstance(meta["pydepth_version"], str):
        raise CheckpointFormatError(f"{path}: metadata pydepth_version must be a string")
    return meta


def _check_claim(path: Any, config: DecoderConfig, tensors: Mapping[str, np.ndarray], opt_meta: Any) -> None:
    """Refuses a config claiming far more parameter tensors than the file holds, from arithmetic
    alone, so the claim's layout is only ever built at a size bounded by the file's."""
    held = sum(1 for k in tensors if not (opt_meta is not None and k.startswith(_OPTIMIZER_PREFIX)))
    claimed = config.parameter_tensor_count
    if claimed > 2 * held + 16:  # within this margin the per-name checks below name what is missing
        raise CheckpointMismatchError(f"{path}: the config ({config.layers} layers) needs {claimed} parameter "
                                      f"tensors; the file holds {held}")


def _parameter_tensors(path: Any, config: DecoderConfig, tensors: Mapping[str, np.ndarray],
                       opt_meta: Any) -> Dict[str, np.ndarray]:
    layout = config.parameter_layout()
    names = {n for n, _ in layout}
    out = {}
    for name, shape in layout:
        if name not in tensors:
            raise CheckpointFormatError(f"{path}: tensor {name!r} is missing")
        arr = tensors[name]
        if arr.dtype != np.float64:
            raise CheckpointFormatError(f"{path}: tensor {name!r} has dtype {arr.dtype}, expected float64")
        if arr.shape != shape:
            raise CheckpointMismatchError(f"{path}: tensor {name!r} has shape {arr.shape}; the config "
                                          f"({config.to_dict()}) needs {shape}")
        out[name] = arr
    stray = sorted(k for k in tensors
                   if k not in names and not (opt_meta is not None and k.startswith(_OPTIMIZER_PREFIX)))
    if stray:
        raise CheckpointFormatError(f"{path}: unexpected tensors {stray[:5]}")
    return out


def _optimizer_state(path: Any, model: DecoderModel, tensors: Mapping[str, np.ndarray],
                     opt_meta: Any) -> Optional[Dict[str, Any]]:
    if opt_meta is None:
        return None
    keys = {"optimizer", "hyperparameters", "step", "slots"}
    if not isinstance(opt_meta, dict) or set(opt_meta) != keys or not isinstance(opt_meta["slots"], list):
        raise CheckpointFormatError(f"{path}: metadata optimizer must be an object with keys {sorted(keys)}")
    names = opt_meta["slots"]
    if len(names) > 2 or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise CheckpointFormatError(f"{path}: metadata optimizer slots must be distinct slot names, "
                                    f"got {str(names)[:80]}")
    slots: Dict[str, Dict[str, np.ndarray]] = {}
    expected = set()
    for p in model.parameters:
        slots[p.name] = {}
        for slot in opt_meta["slots"]:
            key = f"{_OPTIMIZER_PREFIX}{p.name}.{slot}"
            expected.add(key)
            if key not in tensors:
                raise CheckpointFormatError(f"{path}: optimizer tensor {key!r} is missing")
            arr = tensors[key]
            if arr.dtype != np.float64 or arr.shape != p.shape:
                raise CheckpointFormatError(f"{path}: optimizer tensor {key!r} must be float64 of shape "
                                            f"{p.shape}, got {arr.dtype} {arr.shape}")
            slots[p.name][slot] = np.array(arr)
    stray = sorted(k for k in tensors if k.startswith(_OPTIMIZER_PREFIX) and k not in expected)
    if stray:
        raise CheckpointFormatError(f"{path}: unexpected optimizer tensors {stray[:5]}")
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
