# SPDX-License-Identifier: MIT
"""The probe forward of structural recognition: the layer stack, and hooks that record the input
and output of every layer and of every module inside one, in call order (see :mod:`.recognition`)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn

__all__ = ["Call", "LayerRecord", "Recorder", "find_stack", "probe_ids", "record_probe", "probe_context",
           "first_tensor", "out_tensor"]

_PROBE_SHAPE = (2, 8)


@dataclass
class Call:
    """One call of a module inside a layer: its start and end order, arguments and first tensors."""

    name: str
    module: nn.Module
    start: int
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    input: Optional[torch.Tensor]
    input_key: int
    source: Optional[torch.Tensor] = None  # the tensor itself, alive so that input_key stays unique
    end: int = -1
    output: Optional[torch.Tensor] = None


@dataclass
class LayerRecord:
    """What one layer did in the probe forward."""

    calls: List[Call] = field(default_factory=list)
    x: Optional[torch.Tensor] = None
    h: Optional[torch.Tensor] = None
    runs: int = 0


def first_tensor(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[torch.Tensor]:
    if args and isinstance(args[0], torch.Tensor):
        return args[0]
    if isinstance(kwargs.get("hidden_states"), torch.Tensor):
        return kwargs["hidden_states"]
    for value in kwargs.values():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value
    return None


def out_tensor(out: Any) -> Optional[torch.Tensor]:
    out = out[0] if isinstance(out, (tuple, list)) and out else out
    return out if isinstance(out, torch.Tensor) else None


def _indexed(container: nn.Module) -> Optional[List[nn.Module]]:
    if not isinstance(container, (nn.ModuleList, nn.ModuleDict)) or len(container) == 0:
        return None
    keys = [k for k, _ in container.named_children()]
    if not all(k.isdigit() for k in keys):
        return None
    return [container.get_submodule(k) for k in sorted(keys, key=int)]


def find_stack(module: nn.Module) -> Optional[Tuple[str, List[nn.Module]]]:
    """The layer stack: the indexed module list holding the most parameters (None when there is none)."""
    best: Optional[Tuple[int, str, List[nn.Module]]] = None
    for path, sub in module.named_modules():
        children = _indexed(sub)
        if children is None:
            continue
        size = sum(p.numel() for p in sub.parameters())
        if best is None or size > best[0]:
            best = (size, path, children)
    return None if best is None else (best[1], best[2])


def _copy(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    return None if t is None else t.detach().clone()  # later in-place additions must not change the record


class Recorder:
    """Hooks on every layer, every module inside one and every module outside the stack."""

    def __init__(self, module: nn.Module, layers: Sequence[nn.Module]) -> None:
        self.records = [LayerRecord() for _ in layers]
        self.outside: List[Tuple[int, nn.Module, Optional[torch.Tensor]]] = []
        self.clock = 0
        self.handles: List[Any] = []
        inside = {id(m) for layer in layers for m in layer.modules()}
        for b, layer in enumerate(layers):
            self.handles.append(layer.register_forward_pre_hook(
                lambda m, a, k, b=b: self._enter(b, a, k), with_kwargs=True))
            self.handles.append(layer.register_forward_hook(lambda m, a, o, b=b: self._leave(b, o)))
            for name, sub in layer.named_modules():
                if name:
                    self.handles.append(sub.register_forward_pre_hook(
                        lambda m, a, k, b=b, n=name: self._start(b, n, m, a, k), with_kwargs=True))
                    self.handles.append(sub.register_forward_hook(
                        lambda m, a, o, b=b, n=name: self._end(b, n, m, o)))
        for sub in module.modules():
            if id(sub) not in inside:
                self.handles.append(sub.register_forward_pre_hook(
                    lambda m, a, k: self._outside(m, a, k), with_kwargs=True))

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def _enter(self, b: int, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        rec = self.records[b]
        rec.runs += 1
        rec.x = _copy(first_tensor(args, kwargs))

    def _leave(self, b: int, out: Any) -> None:
        self.records[b].h = _copy(out_tensor(out))

    def _start(self, b: int, name: str, mod: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        t = first_tensor(args, kwargs)
        args = tuple(_copy(a) if isinstance(a, torch.Tensor) else a for a in args)
        kwargs = {k: (_copy(v) if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        self.records[b].calls.append(Call(name, mod, self._tick(), args, kwargs, _copy(t), id(t), t))

    def _end(self, b: int, name: str, mod: nn.Module, out: Any) -> None:
        for call in reversed(self.records[b].calls):
            if call.module is mod and call.end < 0:
                call.end, call.output = self._tick(), _copy(out_tensor(out))
                break

    def _outside(self, mod: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        self.outside.append((self._tick(), mod, _copy(first_tensor(args, kwargs))))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


@contextlib.contextmanager
def probe_context(module: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and no gradients; every submodule's ``training`` flag is restored."""
    training = [(m, m.training) for m in module.modules()]
    try:
        module.eval()
        with torch.no_grad():
            yield
    finally:
        for m, flag in training:
            m.training = flag


def probe_ids(module: nn.Module, vocabulary: int) -> torch.Tensor:
    """The probe's token ids: a fixed spread over the vocabulary, on the module's device."""
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    n = _PROBE_SHAPE[0] * _PROBE_SHAPE[1]
    ids = (torch.arange(n, dtype=torch.int64) * 7 + 3) % max(int(vocabulary), 1)
    return ids.reshape(_PROBE_SHAPE).to(device)


def record_probe(module: nn.Module, call: Any, layers: Sequence[nn.Module]) -> Recorder:
    """Runs ``call()`` (one forward of ``module``; inside :func:`probe_context`) with every recording hook installed."""
    recorder = Recorder(module, layers)
    try:
        call()
    finally:
        recorder.remove()
    return recorder
