# SPDX-License-Identifier: MIT
"""Where a depth scaling leaves its mark so a repeat is caught: on the module, on every scaled
parameter, and in a Hugging Face model's config (which ``save_pretrained`` writes to
``config.json`` and ``from_pretrained`` reads back). A copy of the weights without any of these
(``load_state_dict`` into a fresh model) is caught by the audit instead (see
:func:`pydepth.torch.apply_depth_scaling`)."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from torch import nn

__all__ = ["CONFIG_KEY", "recorded_scalings", "leave_mark"]

#: The config attribute (and ``config.json`` key) holding the scalings applied to a model.
CONFIG_KEY = "pydepth_depth_scaling"
_MODULE_ATTRIBUTE = "_pydepth_depth_scaling"
_PARAMETER_ATTRIBUTE = "_pydepth_depth_scaled"


def _hf_config(module: nn.Module) -> Any:
    cfg = getattr(module, "config", None)
    return cfg if callable(getattr(cfg, "to_json_string", None)) else None


def module_records(module: nn.Module) -> Tuple[Any, ...]:
    """The records kept on the module object itself (this process only)."""
    return tuple(getattr(module, _MODULE_ATTRIBUTE, ()))


def recorded_scalings(module: nn.Module, parameters: Sequence[nn.Parameter]) -> Tuple[Dict[str, Any], ...]:
    """Summaries (``scheme``, ``architecture``, ``depth``, ``tensors``, ``forced``, ``where``) of
    the scalings recorded on ``module``, its config, or any of ``parameters``; the first source
    that has any wins, in that order."""
    found = [dict(r.summary(), where="module") for r in module_records(module)]
    if found:
        return tuple(found)
    cfg = _hf_config(module)
    stored = getattr(cfg, CONFIG_KEY, None) if cfg is not None else None
    if isinstance(stored, list) and stored:
        return tuple(dict(s, where="config") for s in stored if isinstance(s, dict))
    for p in parameters:
        mark = getattr(p, _PARAMETER_ATTRIBUTE, None)
        if isinstance(mark, dict):
            return (dict(mark, where="parameters"),)
    return ()


def leave_mark(module: nn.Module, parameters: Sequence[nn.Parameter], record: Any) -> None:
    """Records ``record`` (a :class:`DepthScalingRecord`) on the module, its parameters and its
    Hugging Face config."""
    object.__setattr__(module, _MODULE_ATTRIBUTE, (*module_records(module), record))
    summary = record.summary()
    for p in parameters:
        setattr(p, _PARAMETER_ATTRIBUTE, summary)
    cfg = _hf_config(module)
    if cfg is not None:
        stored: List[Dict[str, Any]] = list(getattr(cfg, CONFIG_KEY, None) or [])
        setattr(cfg, CONFIG_KEY, [*stored, summary])
