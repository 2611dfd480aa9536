"""Model sources of the subcommands that accept torch models: a pydepth config, a Hugging Face
config file, or a Hugging Face model directory (local files only; nothing is downloaded)."""
from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Dict, Tuple

from ..errors import ConfigError

__all__ = ["is_hf_source", "load_torch_model", "HF_WEIGHTS"]

#: File names whose presence makes a directory a checkpoint (weights are loaded, not drawn).
HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
              "pytorch_model.bin.index.json")


def _read_json(path: pathlib.Path) -> Any:
    try:
        with open(path) as fh:
            return json.load(fh)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({err})") from None


def is_hf_source(path: str) -> bool:
    """Whether ``path`` is a Hugging Face model directory or config file (a JSON object with
    ``model_type``) rather than a pydepth ``DecoderConfig`` file."""
    p = pathlib.Path(path)
    if p.is_dir():
        return True
    if not p.is_file():
        raise FileNotFoundError(f"{path}: no such file or directory")
    data = _read_json(p)
    return isinstance(data, dict) and "model_type" in data


def has_weights(path: str) -> bool:
    """True when ``path`` is a saved Hugging Face model directory (its weights are loaded, no seed needed)."""
    p = pathlib.Path(path)
    return p.is_dir() and any((p / name).exists() for name in HF_WEIGHTS)


def _hf_model(path: str, seed: int, dtype: Any) -> Tuple[Any, str]:
    from ..torch._deps import require_transformers
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # belt and braces: local files only
    transformers = require_transformers()
    import torch
    p = pathlib.Path(path)
    if has_weights(path):
        model = transformers.AutoModelForCausalLM.from_pretrained(str(p), local_files_only=True, dtype=dtype)
        return model, f"Hugging Face checkpoint {p} ({model.config.model_type})"
    config_file = p / "config.json" if p.is_dir() else p
    if not config_file.is_file():
        raise FileNotFoundError(f"{path}: a Hugging Face model directory needs config.json")
    data: Dict[str, Any] = dict(_read_json(config_file))
    model_type = data.pop("model_type", None)
    if not isinstance(model_type, str):
        raise ConfigError(f"{config_file}: no model_type; not a Hugging Face config")
    try:
        config = transformers.AutoConfig.for_model(model_type, **data)
    except (ValueError, KeyError) as err:
        raise ConfigError(f"{config_file}: transformers cannot build model_type {model_type!r}: {err}") from None
    torch.manual_seed(seed)  # the random initialization is reproducible from --seed
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model, f"Hugging Face {model_type} from {config_file}, random init (torch seed {seed})"


def load_torch_model(path: str, *, seed: int, dtype: str = "float32", depth_init: bool = True) -> Tuple[Any, str]:
    """A torch module and a one-line description. A pydepth config gives its float64 twin
    (depth-initialized from the SplitMix64 ``seed`` unless ``depth_init`` is false); a Hugging
    Face config gives a randomly initialized causal LM (torch seed ``seed``) and a directory with
    weights gives that checkpoint, both in ``dtype``."""
    from ..torch._deps import require_torch
    torch = require_torch()
    if is_hf_source(path):
        if dtype not in ("float32", "float64"):
            raise ConfigError(f"dtype must be float32 or float64, got {dtype!r}")
        return _hf_model(path, seed, getattr(torch, dtype))
    from .._native._core import SplitMix64
    from ..depth_init import DepthInitializationBudget, FreshDepthInitialization
    from ..model import DecoderModel
    from ..torch import to_torch
    from . import _args
    cfg = _args.load_config(path)
    if depth_init:
        budget = DepthInitializationBudget.for_config(cfg)
        model = FreshDepthInitialization.prepare(cfg, budget, SplitMix64(seed)).complete().model
        what = "depth-initialized"
    else:
        model, what = DecoderModel(cfg, SplitMix64(seed)), "unscaled Xavier"
    return to_torch(model), f"pydepth decoder {path} ({what}, SplitMix64 seed {seed}) as its torch twin"
