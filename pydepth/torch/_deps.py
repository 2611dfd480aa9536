# SPDX-License-Identifier: MIT
"""The one place the bridge imports its optional dependencies, with the extra to install."""
from __future__ import annotations

from typing import Any

from ..errors import TorchDependencyError


def require_torch() -> Any:
    """The ``torch`` module, or :class:`TorchDependencyError` naming the ``pydepth[torch]`` extra."""
    try:
        import torch
    except ImportError as err:
        raise TorchDependencyError(
            f"pydepth.torch needs PyTorch, the optional 'torch' extra: pip install 'pydepth[torch]' "
            f"({err})") from None
    return torch


def require_transformers() -> Any:
    """The ``transformers`` module, or :class:`TorchDependencyError` naming ``pydepth[hf]``."""
    try:
        import transformers
    except ImportError as err:
        raise TorchDependencyError(
            "loading Hugging Face models needs transformers, the optional 'hf' extra: "
            f"pip install 'pydepth[hf]' ({err})") from None
    return transformers
