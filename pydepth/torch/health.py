# SPDX-License-Identifier: MIT
"""Residual health of a torch decoder, observed with hooks, reported as pydepth's own
:class:`pydepth.DepthHealthReport`.

Sites are the residual stream's states: the first layer's input (site 0), the input of each
layer's mid-residual norm (after the attention addition) and each layer's output (after the
feed-forward addition) — 2L+1 sites, or L+1 for a parallel residual (GPT-NeoX's default),
whose labels say so. One forward with forward hooks captures them; ``torch.autograd.grad`` of
the mean loss with respect to exactly these tensors gives their total adjoints, so parameter
``.grad`` is not touched unless ``accumulate_gradients=True`` asks for it. The RMS arithmetic,
ratios and band classes are pydepth's own (:func:`pydepth.health.health_report_from_sites`).
"""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn

from ..batch import Batch
from ..errors import (ArchitectureError, ArgumentTypeError, EmptyValidityError, MissingAdjointError,
                      NonFiniteValueError, TokenError, UnsupportedModuleError)
from ..health import (BranchHealthRow, DepthHealthReport, health_report_from_rms, health_report_from_sites,
                      valid_feature_rms_many)
from .architectures import ArchitectureSpec, DecoderLayout, effective_gain, find_layout
from .structural import forward_hint

__all__ = ["observe_residual_health", "probe_sites", "SiteProbe", "probe_mode", "report_from_probe",
           "report_from_values", "branch_arrays", "unwrap_parallel"]


def _refuse_unobservable(module: nn.Module) -> None:
    """Refuses what hooks and autograd cannot observe: compiled modules and inference mode."""
    if torch.is_inference_mode_enabled():
        raise UnsupportedModuleError(
            "observation runs under torch.inference_mode(), where no autograd graph is recorded and "
            "torch.enable_grad() cannot turn it back on: call observe_residual_health outside the "
            "inference_mode block (torch.no_grad() around it is fine)")
    if hasattr(module, "_orig_mod"):
        raise UnsupportedModuleError(
            f"{type(module).__name__} is compiled with torch.compile; hooks on a compiled graph do not see "
            "the residual stream — observe the original module (compiled._orig_mod)")
    for name, sub in module.named_modules():
        if getattr(sub, "_compiled_call_impl", None) is not None:
            where = f"submodule {name!r}" if name else type(module).__name__
            raise UnsupportedModuleError(
                f"{where} was compiled in place (Module.compile(), torch.compile); hooks on a compiled graph "
                "do not see the residual stream — observe a copy made before .compile(), or use "
                "compiled = torch.compile(m) for training and observe m itself")


@contextlib.contextmanager
def probe_mode(module: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) with gradient checkpointing off and gradients enabled, for one
    probe; every submodule's ``training`` and ``gradient_checkpointing`` flag is restored."""
    training = [(m, m.training) for m in module.modules()]
    checkpointing = [m for m in module.modules() if getattr(m, "gradient_checkpointing", False) is True]
    try:
        module.eval()
        for m in checkpointing:
            m.gradient_checkpointing = False
        with torch.enable_grad():
            yield
    finally:
        for m in checkpointing:
            m.gradient_checkpointing = True
        for m, flag in training:
            m.training = flag


def _first_tensor(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Optional[torch.Tensor], str]:
    if args and isinstance(args[0], torch.Tensor):
        return args[0], "arg"
    if isinstance(kwargs.get("hidden_states"), torch.Tensor):
        return kwargs["hidden_states"], "hidden_states"
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value, key
    return None, ""


def _tensor(out: Any) -> Optional[torch.Tensor]:
    out = out[0] if isinstance(out, (tuple, list)) and out else out
    return out if isinstance(out, torch.Tensor) else None


class _Capture:
    """Forward hooks that record each residual site once, and a copy of each branch's addition."""

    def __init__(self, layout: DecoderLayout) -> None:
        self.layout = layout
        self.sites: Dict[int, torch.Tensor] = {}
        self.branches: Dict[Tuple[int, int], torch.Tensor] = {}
        self.handles: List[Any] = []
        self.duplicate: Optional[int] = None

    def _put(self, site: int, tensor: Any) -> None:
        if site in self.sites:
            self.duplicate = site
        if isinstance(tensor, torch.Tensor):
            self.sites[site] = tensor

    def _branch(self, key: Tuple[int, int], out: Any) -> None:
        t = _tensor(out)
        first = self.sites.get(0)
        if t is not None and first is not None and t.shape != first.shape and t.numel() == first.numel():
            t = t.reshape(first.shape)  # a branch returned with its rows flattened
        if t is not None:  # a copy: some models add the next branch into this tensor in place
            multipliers = self.layout.feed_forward_multipliers if key[1] else self.layout.attention_multipliers
            m = multipliers[key[0]] if multipliers else 1.0
            self.branches[key] = t.detach().clone() if m == 1.0 else t.detach() * m  # what the stream adds

    def _input_hook(self, mod: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        h, where = _first_tensor(args, kwargs)
        if h is None or h.requires_grad:
            self._put(0, h)
            return None
        leaf = h.detach().requires_grad_(True)  # frozen embeddings: the site becomes a leaf
        self._put(0, leaf)
        if where == "arg":
            return (leaf, *args[1:]), kwargs
        return args, {**kwargs, where: leaf}

    def install(self) -> None:
        lay = self.layout
        step = 1 if lay.parallel_residual else 2
        first = lay.layers[0] if lay.layers else lay.final_norm
        if first is None:
            raise ArchitectureError(f"the {lay.architecture} layout names no layer and no final norm: "
                                    "nothing to observe")
        self.handles.append(first.register_forward_pre_hook(self._input_hook, with_kwargs=True))
        for b, layer in enumerate(lay.layers):
            mid = lay.mid_norms[b]
            if mid is not None:
                self.handles.append(mid.register_forward_pre_hook(
                    lambda m, a, k, s=2 * b + 1: self._put(s, _first_tensor(a, k)[0]), with_kwargs=True))
            self.handles.append(layer.register_forward_hook(
                lambda m, a, out, s=step * b + step: self._put(s, _tensor(out))))
            for kind, added in ((0, lay.attention_added[b]), (1, lay.feed_forward_added[b])):
                self.handles.append(added.register_forward_hook(
                    lambda m, a, out, key=(b, kind): self._branch(key, out)))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


def _host(t: torch.Tensor) -> np.ndarray:
    """The tensor's values as a float32 or float64 array on the host, read in place when they
    are already there (float16 and bfloat16 widen to float32 exactly)."""
    t = t.detach()
    if t.dtype not in (torch.float32, torch.float64):
        t = t.to(torch.float32 if t.is_floating_point() and t.element_size() < 4 else torch.float64)
    return t.cpu().contiguous().numpy()


def _gain(norm: Optional[nn.Module], offset: float) -> Tuple[float, ...]:
    g = effective_gain(norm, offset) if norm is not None else None
    return tuple(g.detach().cpu().reshape(-1).tolist()) if g is not None else ()  # exact Python floats


def _vocabulary(module: nn.Module) -> Optional[int]:
    cfg = getattr(module, "config", None)
    v = getattr(cfg, "vocab_size", None) or getattr(cfg, "vocabulary_size", None)
    if isinstance(v, int):
        return v
    for m in module.modules():
        if isinstance(m, nn.Embedding):
            return m.num_embeddings
    return None


def _ids(name: str, values: Any, vocab: Optional[int], *, ignore: Optional[int] = None) -> torch.Tensor:
    arr = values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise TokenError(f"{name} must be integer ids, got dtype {arr.dtype}")
    if arr.ndim != 2 or 0 in arr.shape:
        raise TokenError(f"{name} must have rank 2 [batch, tokens] and no empty axis, got shape {arr.shape}")
    bad = arr < 0 if vocab is None else (arr < 0) | (arr >= vocab)
    if ignore is not None:
        bad &= arr != ignore
    if bad.any():
        b, t = (int(i) for i in np.argwhere(bad)[0])
        span = "non-negative" if vocab is None else f"in [0, {vocab})"
        raise TokenError(f"{name} {int(arr[b, t])} at position [{b}, {t}] is not {span}"
                         + (f" (or {ignore} to ignore)" if ignore is not None else ""))
    return torch.from_numpy(np.array(arr, dtype=np.int64))


def _accepts(module: nn.Module, name: str) -> bool:
    try:
        return name in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class _Request:
    """One observation's checked inputs: ids, labels (-100 ignored), the caller's attention mask
    (passed to the model unchanged) and the positions whose RMS is taken."""

    ids: torch.Tensor
    labels: torch.Tensor
    attention_mask: Optional[torch.Tensor]
    observed: torch.Tensor  # bool [B, T]


def _attention_mask(attention_mask: Any, shape: Tuple[int, ...]) -> Tuple[Optional[torch.Tensor], torch.Tensor]:
    if attention_mask is None:
        return None, torch.ones(shape, dtype=torch.bool)
    am = attention_mask if isinstance(attention_mask, torch.Tensor) else torch.as_tensor(np.asarray(attention_mask))
    if tuple(am.shape) != shape or not bool(((am == 0) | (am == 1)).all()):
        raise TokenError(f"attention_mask must be 0/1 of shape {shape}, got shape {tuple(am.shape)}")
    unmasked = am.to(torch.bool).cpu()
    if not bool(unmasked.any()):
        raise EmptyValidityError(f"the attention mask {shape} selects no position")
    return am, unmasked


def _request(module: nn.Module, input_ids: Any, labels: Any, attention_mask: Any, shifted: bool) -> _Request:
    """Checks ids, labels and mask; the observed positions are those the mask keeps that predict
    a label (``shifted``: position t predicts labels[t + 1], as Hugging Face computes it)."""
    vocab = _vocabulary(module)
    ids = _ids("token id", input_ids, vocab)
    am, unmasked = _attention_mask(attention_mask, tuple(ids.shape))
    if labels is None:
        lab = ids.masked_fill(~unmasked, -100)
    else:
        lab = _ids("label", labels, vocab, ignore=-100)
        if lab.shape != ids.shape:
            raise TokenError(f"labels have shape {tuple(lab.shape)}; input ids have {tuple(ids.shape)}")
    if not bool((lab != -100).any()):
        raise TokenError("every label is -100 (ignored): the mean loss has no target")
    targeted = lab != -100
    if shifted:
        targeted = torch.cat((targeted[:, 1:], torch.zeros_like(targeted[:, :1])), dim=1)
    observed = unmasked & targeted
    if not bool(observed.any()):
        raise EmptyValidityError(f"no unmasked position of the {tuple(observed.shape)} batch predicts a label")
    return _Request(ids, lab, am, observed)


def _device(module: nn.Module) -> torch.device:
    return next((p.device for p in module.parameters()), torch.device("cpu"))


def _call_twin(module: nn.Module, input_ids: Any, labels: Any, attention_mask: Any,
               position_ids: Any = None) -> Tuple[Any, np.ndarray]:
    if position_ids is not None:
        raise TokenError("pydepth's twin takes positions through a pydepth.Batch, not position_ids")
    if attention_mask is not None:
        raise TokenError("pydepth's twin takes padding through a pydepth.Batch, not attention_mask")
    if isinstance(input_ids, Batch):
        return module(input_ids, labels), np.array(input_ids.valid)
    if labels is None:
        raise TokenError("targets (labels) are required for a plain token array; pydepth's twin "
                         "takes targets aligned with the inputs, as in fwd.loss(targets)")
    out = module(input_ids, labels)
    return out, np.ones(tuple(np.shape(out.logits)[:2]), dtype=bool)


def _call_hf(module: nn.Module, input_ids: Any, labels: Any, attention_mask: Any,
             position_ids: Any = None) -> Tuple[Any, np.ndarray]:
    req = _request(module, input_ids, labels, attention_mask, shifted=True)
    device = _device(module)
    kwargs: Dict[str, Any] = {"input_ids": req.ids.to(device), "labels": req.labels.to(device)}
    if position_ids is not None:  # packed rows restart their positions; the model reads the boundaries here
        pos = _ids("position id", position_ids, None)
        if pos.shape != req.ids.shape:
            raise TokenError(f"position_ids have shape {tuple(pos.shape)}; input ids have {tuple(req.ids.shape)}")
        kwargs["position_ids"] = pos.to(device)
    if req.attention_mask is not None:  # the caller's mask, unchanged: labels only select the RMS
        kwargs["attention_mask"] = req.attention_mask.to(device)
    if _accepts(module, "use_cache"):
        kwargs["use_cache"] = False
    return module(**kwargs), req.observed.numpy()


def _call_plain(module: nn.Module, input_ids: Any, labels: Any, attention_mask: Any,
                position_ids: Any = None) -> Tuple[Any, np.ndarray]:
    if position_ids is not None:
        raise TokenError(f"{type(module).__name__} takes no position_ids; observe unpacked rows")
    if attention_mask is not None:
        raise TokenError(f"{type(module).__name__} takes no attention_mask; observe unpadded rows")
    req = _request(module, input_ids, labels, None, shifted=False)
    try:
        inspect.signature(module.forward).bind(req.ids, req.labels)
    except TypeError:
        raise UnsupportedModuleError(
            f"{type(module).__name__}.forward does not take (input_ids, labels); observation needs the "
            "module's own mean loss") from None
    except ValueError:
        pass  # no signature to check (a builtin): let the call decide
    device = _device(module)
    return module(req.ids.to(device), req.labels.to(device)), req.observed.numpy()


#: How each kind of module is called for its own mean loss: (convention, applies, call), first match.
_Call = Callable[..., Tuple[Any, np.ndarray]]
_CONVENTIONS: Tuple[Tuple[str, Callable[[nn.Module, DecoderLayout], bool], _Call], ...] = (
    ("pydepth twin: forward(tokens or Batch, targets aligned with the inputs)",
     lambda m, lay: lay.architecture == "pydepth-twin", _call_twin),
    ("Hugging Face: forward(input_ids=, labels=, attention_mask=), labels shifted inside",
     lambda m, lay: _accepts(m, "input_ids") and _accepts(m, "labels"), _call_hf),
    ("forward(input_ids, labels) returning the mean loss", lambda m, lay: True, _call_plain),
)


def _call(module: nn.Module, layout: DecoderLayout, input_ids: Any, labels: Any,
          attention_mask: Any, position_ids: Any = None) -> Tuple[Any, np.ndarray]:
    """Runs the module's own loss by its convention; returns (output, observed positions [B, T])."""
    for _, applies, call in _CONVENTIONS:
        if applies(module, layout):
            return call(module, input_ids, labels, attention_mask, position_ids)
    raise AssertionError("the last convention applies to every module")


def _loss(out: Any, module: nn.Module) -> torch.Tensor:
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, (tuple, list)):
        scalars = [i for i, item in enumerate(out) if isinstance(item, torch.Tensor) and item.numel() == 1]
        if len(scalars) > 1:
            raise UnsupportedModuleError(
                f"{type(module).__name__} returned a {type(out).__name__} with scalar tensors at positions "
                f"{scalars}; observation cannot tell which is the mean loss — return it alone or as .loss")
        loss = out[scalars[0]] if scalars else None
    if loss is None and isinstance(out, torch.Tensor):
        loss = out
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shapes = ([tuple(i.shape) if isinstance(i, torch.Tensor) else type(i).__name__ for i in out]
                  if isinstance(out, (tuple, list)) else type(out).__name__)
        raise UnsupportedModuleError(
            f"{type(module).__name__} returned no scalar loss (got {shapes}); observation needs a module "
            "whose forward(input_ids, labels) returns the mean loss (as .loss, as the one scalar of a "
            "tuple such as (loss, logits) or (logits, loss), or alone)")
    if not bool(torch.isfinite(loss.detach()).all()):
        raise NonFiniteValueError(f"the mean loss is {float(loss.detach())!r}")
    return loss.reshape(())


def _sum_error(total: torch.Tensor, parts: Sequence[torch.Tensor]) -> Tuple[float, float]:
    """Largest ``|total - sum(parts)|`` and the largest ``sum(|parts|)``, in float64."""
    t = total.detach().to(torch.float64)
    acc = torch.zeros_like(t)
    scale = torch.zeros_like(t)
    for p in parts:
        p64 = p.detach().to(torch.float64)
        acc = acc + p64
        scale = scale + p64.abs()
    return float((t - acc).abs().max()), float(scale.max())


def _stream_shaped(tensors: List[torch.Tensor]) -> List[torch.Tensor]:
    """Sites a layer holds with its rows flattened ([batch·tokens, width], as OPT's feed-forward
    does) read in the stream's [batch, tokens, width] shape; the adjoint is taken before this."""
    shape = tensors[0].shape
    return [t.reshape(shape) if t.shape != shape and t.numel() == tensors[0].numel() else t for t in tensors]


def _check_residual_sums(layout: DecoderLayout, sites: Sequence[torch.Tensor],
                         branches: Dict[Tuple[int, int], torch.Tensor], module: nn.Module) -> None:
    """Each site must be the previous one plus the branch added in between (to rounding): the
    structure the layout assumed is the one the forward ran, or observation is refused."""
    for b in range(layout.depth):
        if (b, 0) not in branches or (b, 1) not in branches:
            raise ArchitectureError(f"layer {b} of {type(module).__name__} did not run both branches of its "
                                    f"{layout.architecture} layout")
        if layout.parallel_residual:
            checks = [(b + 1, [sites[b], branches[(b, 0)], branches[(b, 1)]], "input + attention + feed-forward")]
        else:
            checks = [(2 * b + 1, [sites[2 * b], branches[(b, 0)]], "input + attention branch"),
                      (2 * b + 2, [sites[2 * b + 1], branches[(b, 1)]], "mid state + feed-forward branch")]
        for site, parts, what in checks:
            shapes = [tuple(t.shape) for t in [sites[site], *parts]]
            if len(set(shapes)) > 1:
                raise ArchitectureError(
                    f"{type(module).__name__} as run does not keep the residual stream in one shape: site {site} "
                    f"(layer {b}) and the tensors it should sum ({what}) have shapes {shapes}; observation needs "
                    "[batch, tokens, width] at every site and branch output")
            err, scale = _sum_error(sites[site], parts)
            eps = torch.finfo(sites[site].dtype).eps
            if not err <= 8.0 * eps * scale + torch.finfo(sites[site].dtype).tiny:
                raise ArchitectureError(
                    f"{type(module).__name__} is not a {layout.architecture} decoder as run: residual site "
                    f"{site} (layer {b}) is not {what} (largest difference {err:.3g} at scale {scale:.3g}); "
                    "its norms or additions sit elsewhere — describe it with an ArchitectureSpec "
                    "(norm_placement, attention_post_norm, feed_forward_post_norm, mid_norm) and pass architecture=")


@dataclass(frozen=True)
class SiteProbe:
    """One probe's raw material: the layout, each site's activation and total adjoint
    (detached tensors, site order), the observed positions, the branch outputs, the factor
    that brings the adjoints to those of the mean loss (1.0 when they already are) and, with
    ``accumulate_gradients=True``, the parameters and their gradients, not yet added."""

    layout: DecoderLayout
    sites: Tuple[torch.Tensor, ...]
    adjoints: Tuple[torch.Tensor, ...]
    valid: np.ndarray
    branches: Dict[Tuple[int, int], torch.Tensor]
    adjoint_scale: float = 1.0  # multiplies each adjoint value in float64 before its RMS
    parameter_gradients: Tuple[Tuple[torch.Tensor, Optional[torch.Tensor]], ...] = ()


def unwrap_parallel(module: nn.Module) -> nn.Module:
    """The module inside any chain of DataParallel / DistributedDataParallel wrappers: their
    ``.module`` holds the parameters they train, and observing it runs no collective."""
    while isinstance(module, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
        module = module.module
    return module


def probe_sites(module: nn.Module, input_ids: Any, labels: Any = None, *, attention_mask: Any = None,
                architecture: Union[str, ArchitectureSpec, None] = None, position_ids: Any = None,
                accumulate_gradients: bool = False) -> SiteProbe:
    """Runs one hooked forward of ``module``'s own loss and differentiates it with respect to the
    residual sites (and, with ``accumulate_gradients=True``, the parameters, whose gradients the
    probe carries for the caller to add once every check passed); see
    :func:`observe_residual_health` for the arguments and refusals."""
    if not isinstance(accumulate_gradients, bool):
        raise ArgumentTypeError(f"accumulate_gradients must be a bool, got {accumulate_gradients!r}")
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    module = unwrap_parallel(module)
    _refuse_unobservable(module)
    layout = find_layout(module, architecture)
    capture = _Capture(layout)
    with probe_mode(module):
        capture.install()
        try:
            out, valid = _call(module, layout, input_ids, labels, attention_mask, position_ids)
        except RuntimeError as err:
            if not forward_hint(err):
                raise
            raise UnsupportedModuleError(f"{type(module).__name__}'s forward raised: {str(err).splitlines()[0]}"
                                         f"{forward_hint(err)}") from err
        finally:
            capture.remove()
        loss = _loss(out, module)
        expected = layout.depth + 1 if layout.parallel_residual else 2 * layout.depth + 1
        if capture.duplicate is not None or sorted(capture.sites) != list(range(expected)):
            raise UnsupportedModuleError(
                f"captured residual sites {sorted(capture.sites)} (site {capture.duplicate} twice) in one "
                f"forward of {type(module).__name__}; expected 0..{expected - 1}")
        sites = [capture.sites[i] for i in range(expected)]
        _check_residual_sums(layout, _stream_shaped(sites), capture.branches, module)
        for i, s in enumerate(sites):
            if not s.requires_grad:
                raise MissingAdjointError(f"site {i} does not depend on a tensor that requires grad")
        params = [p for p in module.parameters() if p.requires_grad] if accumulate_gradients else []
        every = torch.autograd.grad(loss, sites + params, allow_unused=True)
    grads = every[:len(sites)]
    for i, g in enumerate(grads):
        if g is None:
            raise MissingAdjointError(f"site {i} has no completed adjoint: the loss does not depend on it")
    return SiteProbe(layout, tuple(_stream_shaped([s.detach() for s in sites])), tuple(_stream_shaped(list(grads))),
                     valid, capture.branches, parameter_gradients=tuple(zip(params, every[len(sites):])))


def _accumulate(pairs: Sequence[Tuple[torch.Tensor, Optional[torch.Tensor]]]) -> None:
    """Adds each parameter's gradient to its ``.grad`` as ``loss.backward()`` would (a parameter
    the loss does not reach keeps its ``.grad``)."""
    with torch.no_grad():
        for p, g in pairs:
            if g is None:
                continue
            if p.grad is None:
                p.grad = g.detach().clone()
            else:
                p.grad.add_(g)


def observe_residual_health(module: nn.Module, input_ids: Any, labels: Any = None, *,
                            attention_mask: Any = None,
                            architecture: Union[str, ArchitectureSpec, None] = None,
                            band: Any = None, position_ids: Any = None,
                            accumulate_gradients: bool = False) -> DepthHealthReport:
    """Activation RMS and completed mean-loss adjoint RMS at every residual site of ``module``.

    ``labels`` follow the model's own convention: for pydepth's twin the targets aligned with the
    inputs (or a :class:`pydepth.Batch` as ``input_ids``); for Hugging Face causal LMs their
    ``labels`` (default: the inputs, padding ignored), shifted inside the model; for other modules
    ``forward(input_ids, labels)`` must return the mean loss. Only positions that predict a
    label (not -100) and are not masked out by ``attention_mask`` enter any RMS (for Hugging
    Face models the last position predicts nothing); ``position_ids`` (Hugging Face models only)
    are passed to the model as given, so packed rows are observed at the positions they were
    trained at; ``band`` is the inclusive ratio band (default the
    chapter's). The probe runs in eval mode (no dropout) with gradient checkpointing off and
    restores both. Gradients (the same rule as :func:`pydepth.observe_residual_health`): by
    default every parameter's ``.grad`` is left as it was; with ``accumulate_gradients=True`` the
    probe's parameter gradients (of the eval-mode loss) are added to ``.grad`` as
    ``loss.backward()`` would, after every check passed, so a refusal changes none. DataParallel and
    DistributedDataParallel wrappers are looked through (their ``.module`` is observed). A
    ``torch.compile``d module is refused with :class:`pydepth.UnsupportedModuleError`; a model
    without a recognized layout with :class:`pydepth.ArchitectureError`."""
    probe = probe_sites(module, input_ids, labels, attention_mask=attention_mask, architecture=architecture,
                        position_ids=position_ids, accumulate_gradients=accumulate_gradients)
    report = report_from_probe(probe, band)
    _accumulate(probe.parameter_gradients)  # only now: every refusal of the report came first
    return report


def _site_labels(layout: DecoderLayout) -> Optional[List[str]]:
    if layout.parallel_residual:
        return ["input"] + [f"block.{b}.parallel_residual.output" for b in range(layout.depth)]
    return None


def branch_arrays(probe: SiteProbe) -> Tuple[List[np.ndarray], List[str]]:
    """The branch outputs as host arrays (attention then feed-forward of each block) and their names."""
    names = [f"block {b} {what} output" for b in range(probe.layout.depth) for what in ("attention", "feed-forward")]
    return [_host(probe.branches[(b, kind)]) for b in range(probe.layout.depth) for kind in (0, 1)], names


def _branch_rows(layout: DecoderLayout, outputs: Sequence[float]) -> Tuple[BranchHealthRow, ...]:
    return tuple(
        BranchHealthRow(block=b, attention_output_rms=outputs[2 * b], feed_forward_output_rms=outputs[2 * b + 1],
                        attention_norm_gain=_gain(layout.attention_norms[b], layout.gain_offset),
                        feed_forward_norm_gain=_gain(layout.feed_forward_norms[b], layout.gain_offset))
        for b in range(layout.depth))


def report_from_probe(probe: SiteProbe, band: Any = None) -> DepthHealthReport:
    """The :class:`pydepth.DepthHealthReport` of one probe's sites, adjoints and branch outputs
    (shared by the separate observation and the in-step one of the training callbacks)."""
    layout, valid = probe.layout, probe.valid
    arrays, names = branch_arrays(probe)
    branches = _branch_rows(layout, valid_feature_rms_many(arrays, valid, what=names))
    return health_report_from_sites([_host(s) for s in probe.sites], [_host(g) for g in probe.adjoints],
                                    valid, band=band, labels=_site_labels(layout), branches=branches,
                                    final_norm_gain=_gain(layout.final_norm, layout.gain_offset),
                                    adjoint_scale=probe.adjoint_scale)


def report_from_values(probe: SiteProbe, activation_rms: Sequence[float], adjoint_rms: Sequence[float],
                       branch_rms: Sequence[float], valid_positions: int, band: Any = None) -> DepthHealthReport:
    """The report of RMS values computed elsewhere (e.g. over several processes) for ``probe``'s layout."""
    layout = probe.layout
    return health_report_from_rms(list(activation_rms), list(adjoint_rms), valid_positions=valid_positions,
                                  width=int(probe.sites[0].shape[-1]), band=band, labels=_site_labels(layout),
                                  branches=_branch_rows(layout, branch_rms),
                                  final_norm_gain=_gain(layout.final_norm, layout.gain_offset))
