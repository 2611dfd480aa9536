# SPDX-License-Identifier: MIT
"""What produced an observation: the separate pass or the training step itself, on which batch,
on which processes, in which precision."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from torch import nn

__all__ = ["ObservationRecord", "MODES", "SEPARATE", "IN_STEP", "outside_autocast", "autocast_dtype"]

SEPARATE = "separate"
IN_STEP = "in-step"

#: Observation modes: name -> what the mode reads (the docs' wording, also the record's).
MODES: Dict[str, str] = {
    SEPARATE: "one extra forward and backward in eval mode, in the model's precision, after the step",
    IN_STEP: "the training step's own forward and backward (training mode, its autocast), on its first micro-batch",
}


@dataclass(frozen=True)
class ObservationRecord:
    """How one observation was made. ``mode`` is a key of :data:`MODES`; ``batch`` is ``"held"``,
    ``"step"`` (the step's batch, observed again) or ``"micro-batch"`` (the step's first
    micro-batch as trained); ``processes`` is ``"local"`` (this process's batch only: no
    collective runs) or ``"all-reduce"`` (every process's micro-batch: the sums of squares and
    counts all-reduced, see :data:`pydepth.torch.callbacks.reduce.PROCESSES`); ``autocast`` is the
    autocast dtype the observed forward ran under (``None``: none); ``precision`` is the residual
    stream's dtype; ``loss_gradient`` is the gradient the step's objective sent into the model's
    loss (accumulation and loss scaling, divided out of the adjoints; 1.0 for the separate pass)
    and ``loss_factor`` the ratio of the model's loss to the micro-batch's mean loss that was
    multiplied back in (a loss summed over ``num_items_in_batch``)."""

    mode: str
    batch: str
    processes: str = "local"
    autocast: Optional[str] = None
    precision: str = ""
    loss_gradient: float = 1.0
    loss_factor: float = 1.0


def autocast_dtype(device_type: str) -> Optional[str]:
    """The autocast dtype active for ``device_type`` now, or ``None``."""
    if not torch.is_autocast_enabled(device_type):
        return None
    return str(torch.get_autocast_dtype(device_type)).replace("torch.", "")


@contextlib.contextmanager
def outside_autocast(module: nn.Module) -> Iterator[List[Optional[str]]]:
    """Runs ``module``'s children with autocast off, also when a wrapper (accelerate's
    mixed-precision ``forward``) turns it on around the module; yields the list of autocast dtypes
    that were active when a child was entered."""
    device = next((p.device.type for p in module.parameters()), "cpu")
    seen: List[Optional[str]] = []
    stack: List[Any] = []

    def enter(m: nn.Module, args: Tuple[Any, ...]) -> None:
        seen.append(autocast_dtype(device))
        ctx = torch.autocast(device_type=device, enabled=False)
        ctx.__enter__()
        stack.append(ctx)

    def leave(m: nn.Module, args: Tuple[Any, ...], out: Any) -> None:
        if stack:
            stack.pop().__exit__(None, None, None)

    handles = []
    try:
        for child in module.children():
            handles.append(child.register_forward_pre_hook(enter))
            handles.append(child.register_forward_hook(leave, always_call=True))
        yield seen
    finally:
        for h in handles:
            h.remove()
        while stack:
            stack.pop().__exit__(None, None, None)
