"""Decoder architectures recognized by their module structure: where the layers are, which
tensors are the residual output projections, and which modules carry the residual sites.

One table (:data:`ARCHITECTURES`) owns these facts; scaling, the audit and the health
observer all read a :class:`DecoderLayout` found here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

from torch import nn

from ..errors import ArchitectureError

__all__ = ["ArchitectureSpec", "ARCHITECTURES", "ResidualProjection", "DecoderLayout",
           "find_layout", "layout_from_patterns", "spec_named"]


@dataclass(frozen=True)
class ArchitectureSpec:
    """Where one family of decoders keeps its pieces (paths are dotted submodule names).

    ``layers`` lists candidate paths of the layer container (a ``ModuleList``/``ModuleDict``),
    tried in order so both a causal-LM wrapper and its bare backbone are recognized; the other
    paths are relative to one layer, except ``final_norm`` which is relative to the layer
    container's parent. ``mid_norm`` is the module whose input is the residual stream between
    the attention and feed-forward additions (``None`` when the residual is parallel)."""

    name: str
    description: str
    layers: Tuple[str, ...]
    attention_output: str
    feed_forward_output: str
    attention_norm: str
    mid_norm: Optional[str]
    final_norm: str
    weight_layout: str  # "[out, in]" (nn.Linear) or "[in, out]" (pydepth, Conv1D)
    projection_type: Optional[str] = None  # class name the output projections must have
    parallel_attribute: Optional[str] = None  # layer attribute that switches to a parallel residual


ARCHITECTURES: Tuple[ArchitectureSpec, ...] = (
    ArchitectureSpec("pydepth-twin", "pydepth's decoder as a torch module (pydepth.torch.to_torch)",
                     ("blocks",), "attention.output", "ffn.down", "attention_norm", "ffn_norm",
                     "final_norm", "[in, out]", "_Projection"),
    ArchitectureSpec("hf-llama", "Hugging Face Llama, Mistral, Qwen2 (and their LlamaModel backbones)",
                     ("model.layers", "layers"), "self_attn.o_proj", "mlp.down_proj",
                     "input_layernorm", "post_attention_layernorm", "norm", "[out, in]"),
    ArchitectureSpec("gpt2", "Hugging Face GPT-2 (Conv1D, [in, out])",
                     ("transformer.h", "h"), "attn.c_proj", "mlp.c_proj", "ln_1", "ln_2", "ln_f",
                     "[in, out]", "Conv1D"),
    ArchitectureSpec("nanogpt", "nanoGPT-style GPT (nn.Linear, [out, in])",
                     ("transformer.h", "h"), "attn.c_proj", "mlp.c_proj", "ln_1", "ln_2", "ln_f",
                     "[out, in]", "Linear"),
    ArchitectureSpec("gpt-neox", "Hugging Face GPT-NeoX (Pythia); parallel residual by default",
                     ("gpt_neox.layers", "layers"), "attention.dense", "mlp.dense_4h_to_h",
                     "input_layernorm", "post_attention_layernorm", "final_layer_norm", "[out, in]",
                     parallel_attribute="use_parallel_residual"),
    ArchitectureSpec("torchtitan-llama", "torchtitan Llama (attention.wo, feed_forward.w2)",
                     ("layers",), "attention.wo", "feed_forward.w2", "attention_norm", "ffn_norm",
                     "norm", "[out, in]"),
)

_BY_NAME: Dict[str, ArchitectureSpec] = {a.name: a for a in ARCHITECTURES}


@dataclass(frozen=True)
class ResidualProjection:
    """One residual output projection: its layer, role and parameter."""

    layer: int
    role: str  # "attention-output" or "feed-forward-output"
    name: str  # parameter name in module.named_parameters()
    parameter: nn.Parameter


@dataclass(frozen=True)
class DecoderLayout:
    """What :func:`find_layout` found in one module. ``layers`` is empty when the layout came
    from name patterns (enough for scaling and audits, not for observing health)."""

    architecture: str
    depth: int
    projections: Tuple[ResidualProjection, ...]
    layers: Tuple[nn.Module, ...] = ()
    layer_paths: Tuple[str, ...] = ()
    attention_outputs: Tuple[nn.Module, ...] = ()
    feed_forward_outputs: Tuple[nn.Module, ...] = ()
    attention_norms: Tuple[nn.Module, ...] = ()
    feed_forward_norms: Tuple[nn.Module, ...] = ()
    mid_norms: Tuple[Optional[nn.Module], ...] = ()
    final_norm: Optional[nn.Module] = None
    parallel_residual: bool = False

    @property
    def projection_names(self) -> Tuple[str, ...]:
        """Parameter names of the residual output projections, in layer order."""
        return tuple(p.name for p in self.projections)


def _get(module: nn.Module, path: str) -> Optional[nn.Module]:
    try:
        return module.get_submodule(path)
    except AttributeError:
        return None


def _indexed_children(container: nn.Module) -> Optional[List[Tuple[int, str, nn.Module]]]:
    if not isinstance(container, (nn.ModuleList, nn.ModuleDict)):
        return None
    out = []
    for key, child in container.named_children():
        if not key.isdigit():
            return None
        out.append((int(key), key, child))
    return sorted(out, key=lambda item: item[0])


def _parameter_names(module: nn.Module) -> Dict[int, str]:
    return {id(p): n for n, p in module.named_parameters()}


def _try(spec: ArchitectureSpec, module: nn.Module) -> Optional[DecoderLayout]:
    names = _parameter_names(module)
    for path in spec.layers:
        container = _get(module, path)
        children = _indexed_children(container) if container is not None else None
        if children is None:  # an empty container is a decoder of depth 0
            continue
        parts = []
        for index, (_, key, layer) in enumerate(children):  # depth position, not the key
            found = [_get(layer, p) for p in (spec.attention_output, spec.feed_forward_output,
                                              spec.attention_norm)]
            mid = _get(layer, spec.mid_norm) if spec.mid_norm else None
            if any(f is None for f in found) or (spec.mid_norm and mid is None):
                break
            att, ffn, norm = found
            if spec.projection_type and not (type(att).__name__ == spec.projection_type
                                             == type(ffn).__name__):
                break
            if not (isinstance(getattr(att, "weight", None), nn.Parameter)
                    and isinstance(getattr(ffn, "weight", None), nn.Parameter)):
                break
            parts.append((index, f"{path}.{key}", layer, att, ffn, norm, mid))
        else:
            parent_path = path.rpartition(".")[0]
            parent = _get(module, parent_path) if parent_path else module
            final = _get(parent, spec.final_norm) if parent is not None else None
            if final is None:
                continue
            parallel = bool(spec.parallel_attribute) and any(
                getattr(p[2], spec.parallel_attribute, False) for p in parts)
            projections = []
            for index, _, _, att, ffn, _, _ in parts:
                projections.append(ResidualProjection(index, "attention-output", names[id(att.weight)], att.weight))
                projections.append(ResidualProjection(index, "feed-forward-output", names[id(ffn.weight)], ffn.weight))
            return DecoderLayout(
                architecture=spec.name, depth=len(parts), projections=tuple(projections),
                layers=tuple(p[2] for p in parts), layer_paths=tuple(p[1] for p in parts),
                attention_outputs=tuple(p[3] for p in parts),
                feed_forward_outputs=tuple(p[4] for p in parts),
                attention_norms=tuple(p[5] for p in parts),
                feed_forward_norms=tuple(p[6] for p in parts),
                mid_norms=tuple(None if parallel else p[6] for p in parts),
                final_norm=final, parallel_residual=parallel)
    return None


def _found_summary(module: nn.Module) -> str:
    children = [n for n, _ in module.named_children()]
    matrices = [n for n, p in module.named_parameters() if p.ndim == 2][:6]
    return (f"top-level modules {children}, first weight matrices {matrices}; recognized "
            f"architectures: {', '.join(a.name for a in ARCHITECTURES)}")


def find_layout(module: nn.Module, architecture: Union[str, ArchitectureSpec, None] = None) -> DecoderLayout:
    """The decoder layout of ``module``: the first recognized architecture, or the one named.

    Raises :class:`pydepth.ArchitectureError` listing what was found when nothing matches
    (pass explicit name patterns to :func:`layout_from_patterns` for other models)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if architecture is None:
        specs: Sequence[ArchitectureSpec] = ARCHITECTURES
    elif isinstance(architecture, ArchitectureSpec):
        specs = (architecture,)
    elif isinstance(architecture, str):
        if architecture not in _BY_NAME:
            raise ArchitectureError(f"unknown architecture {architecture!r}; known: {sorted(_BY_NAME)}")
        specs = (_BY_NAME[architecture],)
    else:
        raise ArchitectureError(f"architecture must be a name or an ArchitectureSpec, got {architecture!r}")
    for spec in specs:
        layout = _try(spec, module)
        if layout is not None:
            return layout
    wanted = "any recognized decoder" if architecture is None else f"architecture {specs[0].name!r}"
    raise ArchitectureError(f"{type(module).__name__} is not {wanted}: found {_found_summary(module)}; "
                            "pass name patterns for other models")


def layout_from_patterns(module: nn.Module, patterns: Sequence[str],
                         depth: Optional[int] = None) -> DecoderLayout:
    """A layout from regular expressions matched (``re.fullmatch``) against parameter names.

    Each pattern's first group must capture the layer index (``r"layers\\.(\\d+)\\.proj\\.weight"``).
    ``depth`` defaults to the number of distinct layer indices matched. A pattern that matches
    nothing, a match without an integer layer index, or an index outside ``[0, depth)`` raises
    :class:`pydepth.ArchitectureError`."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if isinstance(patterns, str) or not patterns:
        raise ArchitectureError(f"patterns must be a non-empty sequence of regular expressions, got {patterns!r}")
    compiled = []
    for pattern in patterns:
        try:
            rx = re.compile(pattern)
        except (re.error, TypeError) as err:
            raise ArchitectureError(f"pattern {pattern!r} is not a regular expression: {err}") from None
        if rx.groups < 1:
            raise ArchitectureError(f"pattern {pattern!r} needs a group capturing the layer index")
        compiled.append(rx)
    found: List[ResidualProjection] = []
    for rx in compiled:
        hits = 0
        for name, param in module.named_parameters():
            m = rx.fullmatch(name)
            if not m:
                continue
            hits += 1
            if not (m.group(1) or "").isdigit():
                raise ArchitectureError(f"pattern {rx.pattern!r} captured {m.group(1)!r} from {name!r}, "
                                        "not a layer index")
            found.append(ResidualProjection(int(m.group(1)), f"pattern {rx.pattern}", name, param))
        if hits == 0:
            raise ArchitectureError(f"pattern {rx.pattern!r} matches no parameter: found {_found_summary(module)}")
    seen: Dict[str, str] = {}
    for p in found:
        if p.name in seen:
            raise ArchitectureError(f"parameter {p.name!r} is matched by two patterns")
        seen[p.name] = p.role
    indices = sorted({p.layer for p in found})
    L = len(indices) if depth is None else depth
    if isinstance(L, bool) or not isinstance(L, int) or L <= 0:
        raise ArchitectureError(f"depth must be a positive integer, got {depth!r}")
    if indices[-1] >= L:
        raise ArchitectureError(f"layer index {indices[-1]} is outside [0, {L}) (depth {L})")
    found.sort(key=lambda p: p.layer)
    return DecoderLayout(architecture="patterns", depth=L, projections=tuple(found))


def spec_named(name: str) -> ArchitectureSpec:
    """The architecture spec called ``name`` (ArchitectureError when unknown)."""
    if name not in _BY_NAME:
        raise ArchitectureError(f"unknown architecture {name!r}; known: {sorted(_BY_NAME)}")
    return _BY_NAME[name]

