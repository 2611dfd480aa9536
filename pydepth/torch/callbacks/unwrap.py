# SPDX-License-Identifier: MIT
"""The module a training run really trains, found inside the wrappers put around it:
DistributedDataParallel and DataParallel (``.module``) and ``torch.compile`` (``._orig_mod``)."""
from __future__ import annotations

from typing import Optional

from torch import nn

from ...errors import UnsupportedModuleError

__all__ = ["unwrap_model"]

_MAX_WRAPPERS = 16  # a wrapper chain longer than this is a cycle, not a training set-up


def _wrapped(module: nn.Module) -> Optional[nn.Module]:
    if isinstance(module, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        return module.module
    inner = getattr(module, "_orig_mod", None)  # torch.compile's OptimizedModule
    return inner if isinstance(inner, nn.Module) else None


def unwrap_model(module: nn.Module) -> nn.Module:
    """The innermost module under any chain of DistributedDataParallel, DataParallel and
    ``torch.compile`` wrappers (``module`` itself when it is not wrapped).

    Observing the inner module runs no collective and leaves the wrappers' state alone; its
    parameters are the ones the wrappers train. Fully sharded models are refused with
    :class:`pydepth.UnsupportedModuleError`: no process holds the whole model."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(module).__name__}")
    current = module
    for _ in range(_MAX_WRAPPERS):
        if type(current).__name__ in ("FullyShardedDataParallel", "FSDPModule") or \
                any(type(c).__name__.startswith("FSDP") for c in type(current).__mro__):
            raise UnsupportedModuleError(
                f"{type(current).__name__} shards the model across processes; residual health needs "
                "the whole model in one process (gather it, or observe a full copy)")
        inner = _wrapped(current)
        if inner is None:
            return current
        current = inner
    raise UnsupportedModuleError(f"{type(module).__name__} wraps more than {_MAX_WRAPPERS} modules deep")
