# SPDX-License-Identifier: MIT
"""Where a depth scaling leaves its mark so a repeat is caught: on the module, on every scaled
parameter, and in a Hugging Face model's own config (which ``save_pretrained`` writes to
``config.json`` and ``from_pretrained`` reads back) beside a fingerprint of the scaled weights.

The mark lives with the weights: before writing, the scaled model gets a config object of its own
(a sibling built from the same config object is untouched), and a config mark counts only while
the fingerprint matches the model's weights (a fresh model built from a scaled model's config
does not inherit it). A copy of the weights without any of these (``load_state_dict`` into a
fresh model) is caught by the audit instead (see :func:`pydepth.torch.apply_depth_scaling`)."""
from __future__ import annotations

import copy
import hashlib
from typing import Any, Dict, List, Sequence, Tuple

import torch
from torch import nn

__all__ = ["CONFIG_KEY", "FINGERPRINT_KEY", "recorded_scalings", "config_records", "leave_mark", "module_records",
           "fingerprint"]

#: The config attribute (and ``config.json`` key) holding the scalings applied to a model.
CONFIG_KEY = "pydepth_depth_scaling"
#: The config attribute holding the fingerprint of the scaled weights after each scaling.
FINGERPRINT_KEY = "pydepth_depth_scaling_weights"
_MODULE_ATTRIBUTE = "_pydepth_depth_scaling"
_PARAMETER_ATTRIBUTE = "_pydepth_depth_scaled"
_SAMPLE = 4096  # elements hashed per tensor: enough to tell two initializations apart


def _hf_config(module: nn.Module) -> Any:
    cfg = getattr(module, "config", None)
    return cfg if callable(getattr(cfg, "to_json_string", None)) else None


def fingerprint(parameters: Sequence[nn.Parameter]) -> str:
    """A hash of the scaled tensors' values (a strided sample of each, with its shape and dtype)."""
    h = hashlib.sha256()
    for p in parameters:
        flat = p.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // _SAMPLE)].to("cpu", torch.float64).contiguous()
        h.update(f"{tuple(p.shape)}{p.dtype}".encode())
        h.update(sample.numpy().tobytes())
    return h.hexdigest()[:32]


def module_records(module: nn.Module) -> Tuple[Any, ...]:
    """The records kept on the module object itself (this process only)."""
    return tuple(getattr(module, _MODULE_ATTRIBUTE, ()))


def _config_records(cfg: Any, parameters: Sequence[nn.Parameter]) -> Tuple[Dict[str, Any], ...]:
    stored = getattr(cfg, CONFIG_KEY, None)
    prints = getattr(cfg, FINGERPRINT_KEY, None)
    if not isinstance(stored, list) or not stored or not isinstance(prints, list) or not prints:
        return ()
    if prints[-1] != fingerprint(parameters):  # the config came without these weights
        return ()
    return tuple(dict(s, where="config") for s in stored if isinstance(s, dict))


def recorded_scalings(module: nn.Module, parameters: Sequence[nn.Parameter]) -> Tuple[Dict[str, Any], ...]:
    """Summaries (``scheme``, ``architecture``, ``depth``, ``tensors``, ``forced``, ``where``) of
    the scalings recorded on ``module``, its config (when the weights are the ones scaled), or any
    of ``parameters``; the first source that has any wins, in that order."""
    found = [dict(r.summary(), where="module") for r in module_records(module)]
    if found:
        return tuple(found)
    cfg = _hf_config(module)
    from_config = _config_records(cfg, parameters) if cfg is not None else ()
    if from_config:
        return from_config
    for p in parameters:
        mark = getattr(p, _PARAMETER_ATTRIBUTE, None)
        if isinstance(mark, dict):
            return (dict(mark, where="parameters"),)
    return ()


def _own_config(module: nn.Module, cfg: Any) -> Any:
    """A copy of ``cfg`` that only ``module`` and its submodules hold (siblings keep the original)."""
    own = copy.deepcopy(cfg)
    for sub in module.modules():
        if getattr(sub, "config", None) is cfg:
            sub.config = own
    return own


def config_records(module: nn.Module, parameters: Sequence[nn.Parameter]) -> Tuple[Dict[str, Any], ...]:
    """The scalings the module's Hugging Face config records for these very weights."""
    cfg = _hf_config(module)
    return _config_records(cfg, parameters) if cfg is not None else ()


def leave_mark(module: nn.Module, parameters: Sequence[nn.Parameter], record: Any,
               earlier: Sequence[Dict[str, Any]] = ()) -> None:
    """Records ``record`` (a :class:`DepthScalingRecord`) on the module, its parameters and a
    Hugging Face config of its own, after ``earlier`` (the config's records for the weights before
    this scaling), with the fingerprint of the scaled weights."""
    object.__setattr__(module, _MODULE_ATTRIBUTE, (*module_records(module), record))
    summary = record.summary()
    for p in parameters:
        setattr(p, _PARAMETER_ATTRIBUTE, summary)
    cfg = _hf_config(module)
    if cfg is None:
        return
    own = _own_config(module, cfg)
    kept: List[Dict[str, Any]] = [{k: v for k, v in s.items() if k != "where"} for s in earlier]
    setattr(own, CONFIG_KEY, [*kept, summary])
    setattr(own, FINGERPRINT_KEY, [fingerprint(parameters)])
