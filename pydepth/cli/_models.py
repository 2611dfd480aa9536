# SPDX-License-Identifier: MIT
"""Model sources of the subcommands that accept torch models: a pydepth config, a Hugging Face
config file, or a Hugging Face model directory (local files only; nothing is downloaded)."""
from __future__ import annotations

import os
import pathlib
from typing import Any, Dict, Tuple

from .._files.reading import read_json
from ..errors import ConfigError

__all__ = ["is_hf_source", "load_torch_model", "HF_WEIGHTS"]

#: File names whose presence makes a directory a checkpoint (weights are loaded, not drawn).
HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
              "pytorch_model.bin.index.json")


def _read_json(path: pathlib.Path) -> Any:
    return read_json(path, "configuration", ConfigError)


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


def _first_line(err: BaseException, limit: int = 200) -> str:
    """The first line of a transformers error, cut short: some list every class they know."""
    line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    line = line.split(" Should contain one of")[0].split(" Model type should be one of")[0]
    return line if len(line) <= limit else line[:limit] + "..."


def _check_model_type(transformers: Any, model_type: str, where: Any) -> None:
    """Refuses a model_type transformers does not know, or one that has no causal LM."""
    import difflib
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:  # another transformers layout: let the builders decide
        return
    version = getattr(transformers, "__version__", "?")
    if model_type not in CONFIG_MAPPING_NAMES:
        close = difflib.get_close_matches(model_type, list(CONFIG_MAPPING_NAMES), n=3)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise ConfigError(f"{where}: transformers {version} does not know model_type {model_type!r}{hint}")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ConfigError(
            f"{where}: model_type {model_type!r} ({CONFIG_MAPPING_NAMES[model_type]}) has no causal language "
            "model in transformers; audit and observe take decoder-only causal LMs (Llama, GPT-2, Gemma, ...), "
            "not encoder-decoders such as T5 or encoders such as BERT")


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
        stored = _read_json(p / "config.json") if (p / "config.json").is_file() else {}
        if isinstance(stored, dict) and isinstance(stored.get("model_type"), str):
            _check_model_type(transformers, stored["model_type"], p / "config.json")
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(str(p), local_files_only=True, dtype=dtype)
        except (ValueError, KeyError) as err:
            raise ConfigError(f"{p}: transformers cannot load this checkpoint: {_first_line(err)}") from None
        return model, f"Hugging Face checkpoint {p} ({model.config.model_type})"
    config_file = p / "config.json" if p.is_dir() else p
    if not config_file.is_file():
        raise FileNotFoundError(f"{path}: a Hugging Face model directory needs config.json")
    data: Dict[str, Any] = dict(_read_json(config_file))
    model_type = data.pop("model_type", None)
    if not isinstance(model_type, str):
        raise ConfigError(f"{config_file}: no model_type; not a Hugging Face config")
    _check_model_type(transformers, model_type, config_file)
    try:
        config = transformers.AutoConfig.for_model(model_type, **data)
        torch.manual_seed(seed)  # the random initialization is reproducible from --seed
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{config_file}: transformers cannot build model_type {model_type!r}: "
                          f"{_first_line(err)}") from None
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
    from .._native._rng import SplitMix64
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
