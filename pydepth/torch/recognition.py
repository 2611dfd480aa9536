# SPDX-License-Identifier: MIT
"""Decoder layers recognized by what they do, not by what their modules are called.

One probe forward (eval mode, no gradients, a few token ids; :mod:`.probe`) records the input and
the output of every module inside each layer of the model's layer stack. A layer is a residual
layer when its output ``h`` and its input ``x`` are tied by additions of module outputs:
sequentially ``m = x + a*A`` (``m`` read by a module of the layer) and ``h = m + c*F``, or in
parallel ``h = x + a*A + c*F``, each to rounding, with constant multipliers ``a`` and ``c`` (1 in
most families; Granite's ``residual_multiplier``). The tensors that set a branch's scale are the
parameter group of the branch's block whose joint multiplication by ``s`` multiplies the branch
by ``s`` (checked by replaying the block), the latest such group in the forward: the output
projection of a pre-norm branch (every expert's in a mixture), the gain of a post-branch norm.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .norms import gain_parameter, is_norm, norm_offset
from .probe import Call, LayerRecord, find_stack, out_tensor, probe_context, record_probe

__all__ = ["LayerFinding", "StructureFinding", "probe_structure", "analyze_layer"]

Scaled = Tuple[Tuple[str, nn.Parameter, str, float], ...]  # (path in the layer, parameter, kind, offset)


@dataclass(frozen=True)
class LayerFinding:
    """One layer's residual structure as the probe found it: ``added`` the modules whose outputs
    (times ``multipliers``) are added to the stream, ``mid`` the module reading the stream between
    the additions (None for a parallel residual), ``norms`` the norm on each branch's path (the
    pre-norm, or the post-branch norm when the branch ends in one), ``scaled`` per branch the
    tensors that set its scale or the reason none do."""

    parallel: bool
    added: Tuple[nn.Module, nn.Module]
    multipliers: Tuple[float, float]
    mid: Optional[nn.Module]
    norms: Tuple[Optional[nn.Module], Optional[nn.Module]]
    scaled: Tuple[Union[str, Scaled], Union[str, Scaled]]
    post_norms: Tuple[bool, bool]


@dataclass(frozen=True)
class StructureFinding:
    """The layer stack, each layer's finding, the final norm (None when no norm reads the last
    layer's output) and the gain offset of the layer norms."""

    stack_path: str
    layers: Tuple[nn.Module, ...]
    findings: Tuple[LayerFinding, ...]
    final_norm: Optional[nn.Module]
    gain_offset: float


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float64)


def _tol(t: torch.Tensor) -> float:
    return 64.0 * torch.finfo(t.dtype).eps if t.dtype.is_floating_point else 0.0


def _fit(d: torch.Tensor, parts: Sequence[torch.Tensor], bound: torch.Tensor) -> Optional[Tuple[float, ...]]:
    """Constants ``c`` with ``d == sum(c_i * parts_i)`` within ``bound`` elementwise (float64), each
    contributing, or None."""
    P = torch.stack([p.reshape(-1) for p in parts], dim=1)
    if len(parts) == 1:
        norm = float((P[:, 0] * P[:, 0]).sum())
        coef = [float((P[:, 0] * d.reshape(-1)).sum()) / norm] if norm > 0.0 else []
    else:
        coef = [float(c) for c in torch.linalg.lstsq(P, d.reshape(-1, 1)).solution[:, 0]]
    if len(coef) != len(parts) or not all(c == c and abs(c) < float("inf") for c in coef):
        return None
    top = float(d.abs().max())
    for snapped in (tuple(float(f"{c:.7g}") for c in coef), tuple(coef)):  # a config's constant, when it fits
        terms = [c * p for c, p in zip(snapped, parts)]
        if any(float(t.abs().max()) <= 1e-6 * top for t in terms):
            return None  # a term that adds nothing is not a branch
        residual = d - sum(terms)
        if bool((residual.abs() <= bound + sum(t.abs() for t in terms) * 1e-12).all()):
            return snapped
    return None


def _stream(t: Optional[torch.Tensor], shape: torch.Size) -> Optional[torch.Tensor]:
    """``t`` viewed in the stream's shape when it holds one stream's values (rows flattened or not)."""
    if t is None or not t.is_floating_point() or t.ndim < 1 or t.shape[-1] != shape[-1] or t.numel() != shape.numel():
        return None
    return t if t.shape == shape else t.reshape(shape)


def _distinct(calls: Sequence[Call], shape: torch.Size) -> List[Tuple[torch.Tensor, List[Call]]]:
    """Stream-shaped outputs, equal values grouped (a block and its last projection return one tensor)."""
    groups: List[Tuple[torch.Tensor, List[Call]]] = []
    for call in calls:
        out = _stream(call.output, shape)
        if out is None:
            continue
        for value, members in groups:
            if torch.equal(value, out):
                members.append(call)
                break
        else:
            groups.append((out, [call]))
    return groups


def _once(calls: Sequence[Call], members: Sequence[Call], innermost: bool) -> Optional[Call]:
    """The innermost (or outermost) of ``members`` whose module runs once in the layer."""
    counts: Dict[int, int] = {}
    for c in calls:
        counts[id(c.module)] = counts.get(id(c.module), 0) + 1
    single = [c for c in members if counts[id(c.module)] == 1]
    if not single:
        return None
    return max(single, key=lambda c: c.start) if innermost else min(single, key=lambda c: c.start)


def _sequential(rec: LayerRecord, x: torch.Tensor, h: torch.Tensor) -> Optional[Tuple[Any, ...]]:
    """(mid reader, A members, F members, a, c) of ``m = x + a*A``, ``h = m + c*F``, or None."""
    x64, h64 = _f64(x), _f64(h)
    tol = _tol(x)
    for reader in sorted(rec.calls, key=lambda c: c.start):
        m = _stream(reader.input, x.shape)
        if m is None or torch.equal(m, x) or torch.equal(m, h):
            continue
        m64 = _f64(m)
        for A, a_members in _distinct([c for c in rec.calls if 0 <= c.end < reader.start], x.shape):
            a = _fit(m64 - x64, [_f64(A)], tol * (x64.abs() + m64.abs()))
            if a is None:
                continue
            for F, f_members in _distinct([c for c in rec.calls if c.start > reader.start or c is reader], x.shape):
                c = _fit(h64 - m64, [_f64(F)], tol * (m64.abs() + h64.abs()))
                if c is not None:
                    return reader, a_members, f_members, a[0], c[0]
    return None


def _parallel(rec: LayerRecord, x: torch.Tensor, h: torch.Tensor) -> Optional[Tuple[Any, ...]]:
    """(A members, F members, a, c) of ``h = x + a*A + c*F``, or None."""
    x64, h64 = _f64(x), _f64(h)
    values = _distinct(rec.calls, x.shape)
    bound = _tol(x) * (x64.abs() + h64.abs())
    for i, (A, a_members) in enumerate(values):
        for F, f_members in values[i + 1:]:
            ac = _fit(h64 - x64, [_f64(A), _f64(F)], bound)
            if ac is not None:
                return a_members, f_members, ac[0], ac[1]
    return None


def _norm_reading(rec: LayerRecord, t: Optional[torch.Tensor], skip: Optional[nn.Module] = None) -> Optional[nn.Module]:
    for call in sorted(rec.calls, key=lambda c: c.start):
        seen = _stream(call.input, t.shape) if t is not None else None
        if call.module is not skip and is_norm(call.module) and seen is not None and torch.equal(seen, t):
            return call.module
    return None


def analyze_layer(rec: LayerRecord) -> Union[str, LayerFinding]:
    """The residual structure of one layer's probe record, or why it is not a residual layer."""
    x, h = rec.x, rec.h
    if x is None or h is None or not x.is_floating_point():
        return "the layer takes or returns no floating tensor"
    if x.shape != h.shape:
        return f"the layer maps shape {tuple(x.shape)} to {tuple(h.shape)}; a residual layer keeps it"
    seq = _sequential(rec, x, h)
    if seq is not None:
        reader, a_members, f_members, a, c = seq
        mid = _once(rec.calls, [k for k in rec.calls if k.input_key == reader.input_key], innermost=False)
        if mid is None:
            return "the module reading the stream between the additions runs more than once"
        return _finding(rec, False, a_members, f_members, (a, c), mid.module, x, _stream(reader.input, x.shape))
    par = _parallel(rec, x, h)
    if par is None:
        return _why_not(rec, x, h)
    a_members, f_members, a, c = par
    if min(k.end for k in a_members) > min(k.end for k in f_members):
        a_members, f_members, a, c = f_members, a_members, c, a
    return _finding(rec, True, a_members, f_members, (a, c), None, x, x)


def _why_not(rec: LayerRecord, x: torch.Tensor, h: torch.Tensor) -> str:
    """The one-line reason a layer is not additive, naming what differs."""
    x64, h64 = _f64(x), _f64(h)
    outs = _distinct(rec.calls, x.shape)
    if any(_fit(h64 - x64, [_f64(v)], _tol(x) * (x64.abs() + h64.abs())) is not None for v, _ in outs):
        return "the layer adds one module output to its input, not two branches"
    last = max(rec.calls, key=lambda c: c.end, default=None)
    seen = _stream(last.output, h.shape) if last is not None else None
    if last is not None and seen is not None and torch.equal(seen, h) and is_norm(last.module):
        return (f"the layer's output is the norm {last.name!r} of the sum (post-LN), so the stream is not "
                "input + branches")
    return ("the layer's output is neither input + a*branch + c*branch (sequential, read in between) nor "
            "a parallel sum of two module outputs: the residual is not a constant multiple of the input plus branches")


def _finding(rec: LayerRecord, parallel: bool, a_members: List[Call], f_members: List[Call],
             multipliers: Tuple[float, float], mid: Optional[nn.Module], x: torch.Tensor,
             ffn_in: Optional[torch.Tensor]) -> Union[str, LayerFinding]:
    added, blocks = [], []
    for members in (a_members, f_members):
        inner, outer = _once(rec.calls, members, True), _once(rec.calls, members, False)
        if inner is None or outer is None:
            return f"the module producing branch {members[0].name!r} runs more than once in the layer"
        added.append(inner)
        blocks.append(outer)
    post = (is_norm(added[0].module), is_norm(added[1].module))
    att_norm = added[0].module if post[0] else _norm_reading(rec, x)
    ffn_norm = added[1].module if post[1] else _norm_reading(rec, ffn_in, skip=att_norm if parallel else None)
    if parallel and ffn_norm is None:
        ffn_norm = att_norm
    scaled = (_scale_group(rec, blocks[0]), _scale_group(rec, blocks[1]))
    return LayerFinding(parallel, (added[0].module, added[1].module), multipliers, mid, (att_norm, ffn_norm),
                        scaled, post)


def _groups(block: nn.Module) -> Dict[str, List[Tuple[str, nn.Parameter, str, float, nn.Module]]]:
    """The block's parameters that could set its output's scale, grouped by their leaf name."""
    out: Dict[str, List[Tuple[str, nn.Parameter, str, float, nn.Module]]] = {}
    for name, p in block.named_parameters():
        parts = name.split(".")
        owner = block.get_submodule(".".join(parts[:-1])) if len(parts) > 1 else block
        if not p.dtype.is_floating_point:
            continue
        if p.ndim >= 2:
            key = parts[-2] if parts[-1] == "weight" and len(parts) > 1 else parts[-1]
            out.setdefault(key, []).append((name, p, "matrix", 0.0, owner))
        elif is_norm(owner) and gain_parameter(owner) is p:
            offset = norm_offset(owner)
            if offset is not None:
                out.setdefault("gain " + ".".join(parts[:-1]), []).append((name, p, "gain", offset, owner))
    return out


def _replay(call: Call, replace: Dict[str, torch.Tensor]) -> Optional[torch.Tensor]:
    args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in call.args)
    kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in call.kwargs.items()}
    out = out_tensor(torch.func.functional_call(call.module, replace, args, kwargs))
    return None if out is None else _f64(out)


def _scaled_by(call: Call, group: Sequence[Tuple[str, nn.Parameter, str, float, nn.Module]], s: float,
               ) -> Optional[torch.Tensor]:
    replace = {n: (p * s if kind == "matrix" else (p + off) * s - off) for n, p, kind, off, _ in group}
    return _replay(call, replace)


def _homogeneous(call: Call, group: Sequence[Tuple[str, nn.Parameter, str, float, nn.Module]]) -> bool:
    """Whether multiplying the group by s multiplies the block's output by s (up to a constant)."""
    try:
        o1, o2, o0 = (_scaled_by(call, group, s) for s in (1.0, 2.0, 0.0))
    except Exception:  # a block that cannot be replayed on its recorded arguments has no group
        return False
    if o1 is None or o2 is None or o0 is None or call.output is None:
        return False
    tol = max(_tol(call.output), 1e-5)  # a structural test: some norms compute in float32 inside a float64 model
    scale = o2.abs() + 2.0 * o1.abs() + 2.0 * o0.abs()
    if not bool(((o1 - _f64(call.output)).abs() <= tol * scale).all()):
        return False
    d1 = o1 - o0
    flat = o0.reshape(-1, o0.shape[-1])
    return (bool(d1.abs().max() > 0.0) and bool(((o2 - o0 - 2.0 * d1).abs() <= tol * scale).all())
            and bool(((flat - flat[:1]).abs() <= tol * (flat.abs() + flat[:1].abs())).all()))


def _scale_group(rec: LayerRecord, block: Call) -> Union[str, Scaled]:
    """The latest parameter group of ``block`` whose scaling scales its output (paths in the layer)."""
    ends = {id(c.module): c.end for c in rec.calls}
    groups = sorted(_groups(block.module).values(),
                    key=lambda g: -max(ends.get(id(owner), block.end) for *_, owner in g))
    for group in groups:  # latest first: the first that scales the output is the one
        if _homogeneous(block, group):
            return tuple((f"{block.name}.{n}", p, kind, off) for n, p, kind, off, _ in group)
    return f"no parameter group of {block.name!r} scales its output (no output projection or gain found)"


def final_norm_of(rec: Any, last: Optional[torch.Tensor]) -> Optional[nn.Module]:
    """The first norm outside the stack that reads the last layer's output."""
    if last is None:
        return None
    for _, module, t in sorted(rec.outside, key=lambda item: item[0]):
        if is_norm(module) and t is not None and t.shape == last.shape and torch.equal(t, last):
            return module
    return None


def _non_finite(layer: nn.Module, rec: LayerRecord) -> Optional[str]:
    """NaN or inf in the probe's stream named as such, with the first parameter holding one."""
    h = rec.h
    if h is None or not h.is_floating_point() or bool(torch.isfinite(h).all()):
        return None
    kind = "NaN" if bool(torch.isnan(h).any()) else "inf"
    for name, p in layer.named_parameters():
        if p.dtype.is_floating_point and not bool(torch.isfinite(p.detach()).all()):
            what = "NaN" if bool(torch.isnan(p.detach()).any()) else "inf"
            return f"the stream holds {kind} after this layer: its parameter {name!r} holds {what}"
    return f"the stream holds {kind} after this layer (from its input or its arithmetic, not its parameters)"


def probe_structure(module: nn.Module, call: Any) -> Union[str, StructureFinding]:
    """The residual structure of ``module`` from one probe forward ``call()``, or why there is none
    (:class:`LookupError` when the module has no layer stack to probe)."""
    stack = find_stack(module)
    if stack is None:
        raise LookupError("no indexed stack of layers (a ModuleList or ModuleDict keyed 0..L-1)")
    path, layers = stack
    with probe_context(module):
        recorder = record_probe(module, call, layers)
        findings = []
        for b, rec in enumerate(recorder.records):
            if rec.runs != 1:
                return f"{path}.{b} ran {rec.runs} times in one forward; a residual layer runs once"
            bad = _non_finite(layers[b], rec)
            if bad:
                return f"{path}.{b}: {bad}"
            found = analyze_layer(rec)
            if isinstance(found, str):
                return f"{path}.{b}: {found}"
            findings.append(found)
    final = final_norm_of(recorder, recorder.records[-1].h)
    first_norm = next((n for f in findings for n in f.norms if n is not None), final)
    offset = norm_offset(first_norm) if first_norm is not None else 0.0
    return StructureFinding(path, tuple(layers), tuple(findings), final, offset if offset is not None else 0.0)
