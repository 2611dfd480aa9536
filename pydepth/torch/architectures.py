# SPDX-License-Identifier: MIT
"""Decoder architectures recognized by their module structure: where the layers are, which
tensors set the scale of what each branch adds to the residual stream, and which modules carry
the residual sites.

One table (:data:`ARCHITECTURES`) owns these facts and one function (:func:`find_layout`) reads
it; scaling, the audit and the health observer all read the :class:`DecoderLayout` found here.
A layer matches a spec only when its structure is the one the spec describes: every named
module exists, the layer holds exactly the norms the spec names (no extra, none missing), and
each norm multiplies by the gain the spec says (``weight`` or ``1 + weight``). A model whose
structure no spec describes is refused, never read in the wrong place.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from torch import nn

from ..errors import ArchitectureError, ScalingSchemeError
from .layout import DecoderLayout, ResidualProjection
from .norms import effective_gain, gain_mismatch

__all__ = ["ArchitectureSpec", "ARCHITECTURES", "NORM_PLACEMENTS", "ResidualProjection",
           "DecoderLayout", "find_layout", "layout_from_patterns", "resolve_layout", "spec_named", "effective_gain"]

#: Where a layer's norms sit relative to its two branches ``f`` (attention, feed-forward):
#: ``pre`` ``x + f(norm(x))``; ``post`` ``x + norm(f(x))``; ``sandwich`` ``x + norm2(f(norm1(x)))``.
NORM_PLACEMENTS: Tuple[str, ...] = ("pre", "post", "sandwich")

_PLACEMENT_NEEDS = {  # placement -> fields that must be set (the others are checked below)
    "pre": ("attention_norm",),
    "post": ("attention_post_norm", "feed_forward_post_norm"),
    "sandwich": ("attention_norm", "attention_post_norm", "feed_forward_post_norm"),
}


@dataclass(frozen=True)
class ArchitectureSpec:
    """Where one family of decoders keeps its pieces (paths are dotted submodule names).

    ``layers`` lists candidate paths of the layer container (a ``ModuleList``/``ModuleDict``),
    tried in order so a causal-LM wrapper and its bare backbone are both recognized;
    ``final_norm`` is relative to the container's parent; every other path is relative to one
    layer. ``attention_output`` and ``feed_forward_output`` are the modules whose outputs are the
    two branches before any post-branch norm (``o_proj`` and ``down_proj``, or a whole
    mixture-of-experts block); ``mid_norm`` is the module whose first input is the residual
    stream between the two additions (the feed-forward pre-norm, or for ``post`` placement the
    feed-forward block itself; ``None`` for a parallel residual). ``norm_placement`` is one of
    :data:`NORM_PLACEMENTS`; ``attention_post_norm``/``feed_forward_post_norm`` name the norms
    that follow each branch (``post``, ``sandwich``). Depth scaling multiplies the projections'
    weights (``feed_forward_weights`` lists the parameter paths when the feed-forward output is a
    block, e.g. fused 3-D expert tensors; ``dense_feed_forward_weights`` those of the dense layers
    a mixture-of-experts model may interleave) for ``pre``, and the post-branch norms' effective
    gains for ``post`` and ``sandwich``. ``gain_offset`` is 1.0 when a norm multiplies by
    ``1 + weight`` (Gemma). ``parallel`` marks ``x + attn(norm(x)) + ffn(norm'(x))`` (a
    ``parallel_attribute`` of the layer may switch it on); ``feed_forward_norm`` names the
    feed-forward pre-norm of a parallel layer when it is not ``attention_norm``.
    ``unsupported_attributes`` are layer attributes that must be false (they change the
    residual's meaning). Errors in a spec raise :class:`pydepth.ArchitectureError`."""

    name: str
    description: str
    layers: Tuple[str, ...]
    attention_output: str
    feed_forward_output: str
    attention_norm: Optional[str]
    mid_norm: Optional[str]
    final_norm: str
    weight_layout: str = "[out, in]"  # "[out, in]" (nn.Linear) or "[in, out]" (pydepth, Conv1D)
    projection_type: Optional[str] = None  # class name the output projections must have
    parallel_attribute: Optional[str] = None  # layer attribute that switches to a parallel residual
    norm_placement: str = "pre"
    attention_post_norm: Optional[str] = None
    feed_forward_post_norm: Optional[str] = None
    feed_forward_norm: Optional[str] = None
    feed_forward_weights: Tuple[str, ...] = ()
    dense_feed_forward_weights: Tuple[str, ...] = ()
    gain_offset: float = 0.0
    parallel: bool = False
    unsupported_attributes: Tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.norm_placement not in NORM_PLACEMENTS:
            raise ArchitectureError(f"ArchitectureSpec {self.name!r}: norm_placement {self.norm_placement!r} "
                                    f"is not one of {list(NORM_PLACEMENTS)}")
        if isinstance(self.layers, str) or not self.layers:
            raise ArchitectureError(f"ArchitectureSpec {self.name!r}: layers must be a non-empty tuple of "
                                    f"paths, got {self.layers!r}")
        missing = [f for f in _PLACEMENT_NEEDS[self.norm_placement] if not getattr(self, f)]
        if missing:
            raise ArchitectureError(f"ArchitectureSpec {self.name!r}: norm_placement "
                                    f"{self.norm_placement!r} needs {', '.join(missing)}")
        if self.norm_placement == "pre" and (self.attention_post_norm or self.feed_forward_post_norm):
            raise ArchitectureError(f"ArchitectureSpec {self.name!r}: a post-branch norm is named, so "
                                    "norm_placement is 'sandwich' (or 'post'), not 'pre'")
        if self.norm_placement == "post" and self.parallel:
            raise ArchitectureError(f"ArchitectureSpec {self.name!r}: post-branch norms with a parallel "
                                    "residual are not supported")
        if not self.parallel and not self.parallel_attribute and not self.mid_norm:
            raise ArchitectureError(f"ArchitectureSpec {self.name!r}: a sequential layer needs mid_norm "
                                    "(the module whose input is the residual between the two additions)")

    @property
    def norm_paths(self) -> Tuple[str, ...]:
        """Every norm of one layer this spec names (the layer must hold exactly these)."""
        mid = self.mid_norm if self.norm_placement != "post" else None
        names = (self.attention_norm, mid, self.feed_forward_norm, self.attention_post_norm,
                 self.feed_forward_post_norm)
        return tuple(dict.fromkeys(n for n in names if n))


_LLAMA_LAYERS = ("model.layers", "layers")
_H_LAYERS = ("transformer.h", "h")

#: The decoders known by name: the layout table :func:`find_layout` reads when an architecture is
#: named or the probe cannot run.
ARCHITECTURES: Tuple[ArchitectureSpec, ...] = (
    ArchitectureSpec("pydepth-twin", "pydepth's decoder as a torch module (pydepth.torch.to_torch)",
                     ("blocks",), "attention.output", "ffn.down", "attention_norm", "ffn_norm",
                     "final_norm", "[in, out]", "_Projection"),
    ArchitectureSpec("hf-gemma-sandwich", "Hugging Face Gemma2, Gemma3: norms before and after each "
                     "branch, gains 1 + weight", _LLAMA_LAYERS, "self_attn.o_proj", "mlp.down_proj",
                     "input_layernorm", "pre_feedforward_layernorm", "norm", norm_placement="sandwich",
                     attention_post_norm="post_attention_layernorm",
                     feed_forward_post_norm="post_feedforward_layernorm", gain_offset=1.0),
    ArchitectureSpec("hf-olmo2", "Hugging Face OLMo2: a norm after each branch", _LLAMA_LAYERS,
                     "self_attn.o_proj", "mlp.down_proj", None, "mlp", "norm", norm_placement="post",
                     attention_post_norm="post_attention_layernorm",
                     feed_forward_post_norm="post_feedforward_layernorm"),
    ArchitectureSpec("hf-gemma", "Hugging Face Gemma: pre-norms with gains 1 + weight", _LLAMA_LAYERS,
                     "self_attn.o_proj", "mlp.down_proj", "input_layernorm", "post_attention_layernorm",
                     "norm", gain_offset=1.0),
    ArchitectureSpec("hf-llama", "Hugging Face Llama, Mistral, Qwen2, Qwen3, Phi3, StableLM (and their "
                     "backbones)", _LLAMA_LAYERS, "self_attn.o_proj", "mlp.down_proj", "input_layernorm",
                     "post_attention_layernorm", "norm"),
    ArchitectureSpec("hf-llama-parallel", "Hugging Face StableLM with use_parallel_residual (one norm, "
                     "parallel residual)", _LLAMA_LAYERS, "self_attn.o_proj", "mlp.down_proj",
                     "input_layernorm", None, "norm", parallel=True),
    ArchitectureSpec("hf-qwen2-moe", "Hugging Face Qwen2-MoE: fused experts and a shared expert (dense "
                     "layers too)", _LLAMA_LAYERS, "self_attn.o_proj", "mlp", "input_layernorm",
                     "post_attention_layernorm", "norm",
                     feed_forward_weights=("mlp.experts.down_proj", "mlp.shared_expert.down_proj.weight"),
                     dense_feed_forward_weights=("mlp.down_proj.weight",)),
    ArchitectureSpec("hf-deepseek-moe", "Hugging Face DeepSeek-V2/V3-style experts: fused experts and shared "
                     "experts (dense first layers too)", _LLAMA_LAYERS, "self_attn.o_proj", "mlp", "input_layernorm",
                     "post_attention_layernorm", "norm",
                     feed_forward_weights=("mlp.experts.down_proj", "mlp.shared_experts.down_proj.weight"),
                     dense_feed_forward_weights=("mlp.down_proj.weight",)),
    ArchitectureSpec("hf-moe", "Hugging Face Mixtral, Qwen3-MoE, OLMoE: fused 3-D experts (dense layers too)",
                     _LLAMA_LAYERS, "self_attn.o_proj", "mlp", "input_layernorm", "post_attention_layernorm",
                     "norm", feed_forward_weights=("mlp.experts.down_proj",),
                     dense_feed_forward_weights=("mlp.down_proj.weight",)),
    ArchitectureSpec("gpt2", "Hugging Face GPT-2 (Conv1D, [in, out])", _H_LAYERS, "attn.c_proj",
                     "mlp.c_proj", "ln_1", "ln_2", "ln_f", "[in, out]", "Conv1D"),
    ArchitectureSpec("nanogpt", "nanoGPT-style GPT (nn.Linear, [out, in])", _H_LAYERS, "attn.c_proj",
                     "mlp.c_proj", "ln_1", "ln_2", "ln_f", "[out, in]", "Linear"),
    ArchitectureSpec("gpt-neox", "Hugging Face GPT-NeoX (Pythia); parallel residual by default",
                     ("gpt_neox.layers", "layers"), "attention.dense", "mlp.dense_4h_to_h",
                     "input_layernorm", "post_attention_layernorm", "final_layer_norm",
                     parallel_attribute="use_parallel_residual", feed_forward_norm="post_attention_layernorm"),
    ArchitectureSpec("gpt-j", "Hugging Face GPT-J: one norm, parallel residual", _H_LAYERS,
                     "attn.out_proj", "mlp.fc_out", "ln_1", None, "ln_f", parallel=True),
    ArchitectureSpec("falcon-bloom", "Hugging Face Falcon (sequential) and BLOOM", _H_LAYERS,
                     "self_attention.dense", "mlp.dense_4h_to_h", "input_layernorm", "post_attention_layernorm",
                     "ln_f", unsupported_attributes=("apply_residual_connection_post_layernorm",)),
    ArchitectureSpec("falcon-parallel", "Hugging Face Falcon with parallel_attn and one norm", _H_LAYERS,
                     "self_attention.dense", "mlp.dense_4h_to_h", "input_layernorm", None, "ln_f", parallel=True),
    ArchitectureSpec("falcon-parallel-2ln", "Hugging Face Falcon's new decoder architecture (ln_attn, "
                     "ln_mlp, parallel)", _H_LAYERS, "self_attention.dense", "mlp.dense_4h_to_h", "ln_attn",
                     None, "ln_f", parallel=True, feed_forward_norm="ln_mlp"),
    ArchitectureSpec("torchtitan-llama", "torchtitan Llama (attention.wo, feed_forward.w2)",
                     ("layers",), "attention.wo", "feed_forward.w2", "attention_norm", "ffn_norm", "norm"),
)

_BY_NAME: Dict[str, ArchitectureSpec] = {a.name: a for a in ARCHITECTURES}


def _get(module: nn.Module, path: Optional[str]) -> Optional[nn.Module]:
    if not path:
        return None
    try:
        return module.get_submodule(path)
    except AttributeError:
        return None


def _indexed_children(container: Optional[nn.Module]) -> Optional[List[Tuple[str, nn.Module]]]:
    if not isinstance(container, (nn.ModuleList, nn.ModuleDict)):
        return None
    out = []
    for key, child in container.named_children():
        if not key.isdigit():
            return None
        out.append((int(key), key, child))
    return [(key, child) for _, key, child in sorted(out, key=lambda item: item[0])]


def _norm_children(layer: nn.Module) -> List[str]:
    return [n for n, m in layer.named_children() if "norm" in type(m).__name__.lower()]


def _check_norms(spec: ArchitectureSpec, layer: nn.Module) -> Optional[str]:
    named = spec.norm_paths
    direct = sorted(n for n in named if "." not in n)
    held = sorted(_norm_children(layer))
    if held != direct:
        return (f"layer norms {held} where the spec names {direct} (attention_norm, mid_norm, "
                f"feed_forward_norm, attention_post_norm, feed_forward_post_norm)")
    for path in named:
        norm = _get(layer, path)
        if norm is None:
            return f"no norm {path!r}"
        why = gain_mismatch(norm, spec.gain_offset)
        if why:
            return f"{path}: {why}"
    return None


@dataclass(frozen=True)
class _Layer:
    """One layer's pieces as a spec names them."""

    path: str
    layer: nn.Module
    attention_output: nn.Module
    feed_forward_output: nn.Module
    attention_norm: Optional[nn.Module]
    feed_forward_norm: Optional[nn.Module]
    mid: Optional[nn.Module]
    attention_added: nn.Module
    feed_forward_added: nn.Module
    scaled: Tuple[Tuple[str, str, nn.Parameter, str], ...]  # (role, path in layer, parameter, kind)


def _parameter(layer: nn.Module, path: str) -> Optional[nn.Parameter]:
    try:
        p = layer.get_parameter(path)
    except AttributeError:
        return None
    return p if isinstance(p, nn.Parameter) else None


def _unclaimed(spec: ArchitectureSpec, layer: nn.Module, paths: Sequence[str], taken: set) -> Optional[str]:
    """A parameter of the feed-forward block that looks like an output projection (it shares a
    leaf name with ``paths``) but is not among them: every expert's must be scaled."""
    leaves = {path.split(".")[-2] if path.endswith(".weight") else path.split(".")[-1] for path in paths}
    ffn_module = _get(layer, spec.feed_forward_output)
    for name, p in (ffn_module.named_parameters() if ffn_module is not None else ()):
        if id(p) not in taken and leaves & set(name.split(".")):
            return (f"{spec.feed_forward_output}.{name} looks like an output projection that "
                    "feed_forward_weights does not name")
    return None


def _feed_forward_paths(spec: ArchitectureSpec, layer: nn.Module) -> Tuple[str, ...]:
    """The feed-forward parameters scaled in this layer: the expert tensors, or in a dense layer
    of a mixture-of-experts model (``dense_feed_forward_weights``) the dense ones."""
    if not spec.feed_forward_weights:
        return (f"{spec.feed_forward_output}.weight",)
    if spec.dense_feed_forward_weights and any(_parameter(layer, p) is None for p in spec.feed_forward_weights):
        return spec.dense_feed_forward_weights
    return spec.feed_forward_weights


def _scaled(spec: ArchitectureSpec, layer: nn.Module) -> Union[str, Tuple[Tuple[str, str, nn.Parameter, str], ...]]:
    """The tensors depth scaling multiplies in one layer, or why they are not there."""
    ffn_paths: Tuple[str, ...] = ()
    if spec.norm_placement != "pre":  # the post-branch norm sets the branch's scale: its gain
        wanted = [("attention-output", f"{spec.attention_post_norm}.weight", "gain"),
                  ("feed-forward-output", f"{spec.feed_forward_post_norm}.weight", "gain")]
    else:
        ffn_paths = _feed_forward_paths(spec, layer)
        wanted = ([("attention-output", f"{spec.attention_output}.weight", "matrix")]
                  + [("feed-forward-output", path, "matrix") for path in ffn_paths])
    out = []
    for role, path, kind in wanted:
        p = _parameter(layer, path)
        if p is None:
            return (f"no parameter {path!r} (attention_output, feed_forward_output, feed_forward_weights, "
                    "dense_feed_forward_weights)")
        out.append((role, path, p, kind))
    if spec.feed_forward_weights:
        why = _unclaimed(spec, layer, ffn_paths, {id(p) for _, _, p, _ in out})
        if why:
            return why
    return tuple(out)


def _match_layer(spec: ArchitectureSpec, path: str, layer: nn.Module) -> Union[Tuple[int, str], _Layer]:
    """One layer's pieces under ``spec``, or how many checks passed and the first reason it does not match."""
    att, ffn = _get(layer, spec.attention_output), _get(layer, spec.feed_forward_output)
    if att is None or ffn is None:
        missing = spec.attention_output if att is None else spec.feed_forward_output
        return 0, f"no module {missing!r} (attention_output, feed_forward_output)"
    if spec.projection_type and not type(att).__name__ == spec.projection_type == type(ffn).__name__:
        return 1, (f"output projections are {type(att).__name__}/{type(ffn).__name__}, not "
                f"{spec.projection_type} (projection_type)")
    bad = [a for a in spec.unsupported_attributes if getattr(layer, a, False)]
    if bad:
        return 2, f"{bad[0]} is set: the residual stream is not the sum this spec describes"
    why = _check_norms(spec, layer)
    if why:
        return 3, why
    mid = _get(layer, spec.mid_norm)
    if spec.mid_norm and mid is None:
        return 4, f"no module {spec.mid_norm!r} (mid_norm)"
    scaled = _scaled(spec, layer)
    if isinstance(scaled, str):
        return 5, scaled
    att_norm = _get(layer, spec.attention_norm)
    ffn_norm = _get(layer, spec.feed_forward_norm or spec.mid_norm) if spec.norm_placement != "post" else None
    if spec.norm_placement == "post":
        att_norm, ffn_norm = _get(layer, spec.attention_post_norm), _get(layer, spec.feed_forward_post_norm)
    return _Layer(path, layer, att, ffn, att_norm, ffn_norm, mid,
                  _get(layer, spec.attention_post_norm) or att, _get(layer, spec.feed_forward_post_norm) or ffn,
                  scaled)


def _layout(spec: ArchitectureSpec, module: nn.Module, parts: List[_Layer], final: nn.Module) -> DecoderLayout:
    names = {id(p): n for n, p in module.named_parameters()}
    switch = spec.parallel_attribute
    parallel = spec.parallel or (any(getattr(p.layer, switch, False) for p in parts) if switch else False)
    offset = spec.gain_offset if spec.norm_placement != "pre" else 0.0
    projections = tuple(ResidualProjection(index, role, names[id(param)], param, kind,
                                           offset if kind == "gain" else 0.0)
                        for index, part in enumerate(parts) for role, _, param, kind in part.scaled)
    return DecoderLayout(
        architecture=spec.name, depth=len(parts), projections=projections,
        layers=tuple(p.layer for p in parts), layer_paths=tuple(p.path for p in parts),
        attention_outputs=tuple(p.attention_output for p in parts),
        feed_forward_outputs=tuple(p.feed_forward_output for p in parts),
        attention_norms=tuple(p.attention_norm for p in parts),
        feed_forward_norms=tuple(p.feed_forward_norm for p in parts),
        mid_norms=tuple(None if parallel else p.mid for p in parts),
        final_norm=final, parallel_residual=parallel, norm_placement=spec.norm_placement,
        gain_offset=spec.gain_offset, attention_added=tuple(p.attention_added for p in parts),
        feed_forward_added=tuple(p.feed_forward_added for p in parts))


def try_spec(spec: ArchitectureSpec, module: nn.Module) -> Union[Tuple[float, str], DecoderLayout, None]:
    """The layout of ``module`` under ``spec`` by module names alone; when a layer container was
    found but does not match, how far the match got (layers matched plus checks passed, tenths)
    and why it stopped; None when the spec's containers are absent."""
    reason: Optional[Tuple[float, str]] = None
    for path in spec.layers:
        children = _indexed_children(_get(module, path))
        if children is None:
            continue
        parts: List[_Layer] = []
        for key, layer in children:  # in depth order; the key names it
            part = _match_layer(spec, f"{path}.{key}", layer)
            if isinstance(part, tuple):
                reason = (len(parts) + part[0] / 10.0, f"{path}.{key}: {part[1]}")
                break
            parts.append(part)
        else:
            parent_path = path.rpartition(".")[0]
            parent = _get(module, parent_path) if parent_path else module
            final = _get(parent, spec.final_norm) if parent is not None else None
            if final is None:
                reason = (len(parts) + 0.9, f"no final norm {spec.final_norm!r} beside {path} (final_norm)")
                continue
            why = gain_mismatch(final, spec.gain_offset)
            if why:
                reason = (len(parts) + 0.9, f"{spec.final_norm}: {why}")
                continue
            return _layout(spec, module, parts, final)
    return reason


_SPEC_HELP = ("describe it with pydepth.torch.ArchitectureSpec(name, description, layers, attention_output, "
              "feed_forward_output, attention_norm, mid_norm, final_norm, norm_placement=..., "
              "attention_post_norm=..., feed_forward_post_norm=...) and pass architecture=spec "
              "(README, docs/numerics-torch.md §6), or pass patterns= to scale and audit only")


def _found_summary(module: nn.Module) -> str:
    children = [n for n, _ in module.named_children()][:6]
    matrices = [n for n, p in module.named_parameters() if p.ndim >= 2][:3]
    stacks = [(n, m) for n, m in module.named_modules() if _indexed_children(m)][:1]
    found = f"top-level modules {children}, first weight tensors {matrices}"
    for path, stack in stacks:
        first = next(iter(stack.children()))
        parts = [f"{n} ({type(m).__name__})" for n, m in first.named_children()][:8]
        found += f"; layer stack {path!r} of {len(stack)}, each holding {parts}"
    return found


def _model_type(module: nn.Module) -> Optional[str]:
    value = getattr(getattr(module, "config", None), "model_type", None)
    return value if isinstance(value, str) and value else None


def _resolve_specs(module: nn.Module, architecture: Union[str, ArchitectureSpec, None]) -> Sequence[ArchitectureSpec]:
    """The specs to try; empty when the structure alone decides (no architecture, or the model's
    own Hugging Face ``model_type``)."""
    if architecture is None:
        return ()
    if isinstance(architecture, ArchitectureSpec):
        return (architecture,)
    if isinstance(architecture, str):
        if architecture not in _BY_NAME and architecture == _model_type(module):
            return ()
        if architecture not in _BY_NAME and _model_type(module):
            raise ArchitectureError(f"architecture {architecture!r} is neither a known architecture nor this "
                                    f"model's model_type {_model_type(module)!r}; known: {sorted(_BY_NAME)}")
        return (spec_named(architecture),)
    raise ArchitectureError(f"architecture must be a name or an ArchitectureSpec, got {type(architecture).__name__}")


def _ranked(module: nn.Module, specs: Sequence[ArchitectureSpec]) -> List[Tuple[float, str]]:
    """The table's specs that found a layer stack here, furthest match first."""
    near = []
    for spec in specs:
        found = try_spec(spec, module)
        if isinstance(found, tuple):
            near.append((found[0], f"{spec.name} ({found[1]})"))
    return sorted(near, key=lambda item: -item[0])


def _refuse(module: nn.Module, wanted: str, reason: str, specs: Sequence[ArchitectureSpec]) -> ArchitectureError:
    near = _ranked(module, specs)[:2]
    lines = [f"{type(module).__name__} is not {wanted}: {reason}",
             f"found {_found_summary(module)}"]
    if near:
        lines.append("nearest specs: " + "; ".join(text for _, text in near))
    lines.append(f"named architectures: {', '.join(a.name for a in ARCHITECTURES)}; for another model, {_SPEC_HELP}")
    return ArchitectureError("\n".join(lines))


def _static(module: nn.Module, specs: Sequence[ArchitectureSpec], wanted: str, why: str) -> DecoderLayout:
    for spec in specs:
        found = try_spec(spec, module)
        if isinstance(found, DecoderLayout):
            return found
    near = _ranked(module, specs)
    raised = why.startswith("the probe forward raised")
    raise _refuse(module, wanted, why if raised or not near else near[0][1], specs)


def _table_name(module: nn.Module, candidate: DecoderLayout) -> Optional[str]:
    """The table's name for a layout found by structure: the first spec whose module names give the
    same layers and the same scaled tensors."""
    wanted = {id(p.parameter) for p in candidate.projections}
    for spec in ARCHITECTURES:
        static = try_spec(spec, module)
        if (isinstance(static, DecoderLayout) and static.layers == candidate.layers
                and {id(p.parameter) for p in static.projections} == wanted):
            return spec.name
    return None


def find_layout(module: nn.Module, architecture: Union[str, ArchitectureSpec, None] = None) -> DecoderLayout:
    """The decoder layout of ``module``, recognized from what its layers do.

    One probe forward finds the residual stream (:mod:`pydepth.torch.recognition`): the tensor
    entering each layer, the branch outputs added to it (times a constant) and the modules that read
    it; the table names what was found. ``architecture`` (a spec, a table name, or the model's
    Hugging Face ``model_type``) takes the layout from the spec's module names instead, still
    checked by the probe. When the probe cannot run (no vocabulary, a meta-device model) the table
    decides. A refusal raises :class:`pydepth.ArchitectureError` whose first line is the reason."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    specs = _resolve_specs(module, architecture)
    from .structural import recognize  # recognition reads the probe; this module's table only names
    found = recognize(module, lambda candidate: _table_name(module, candidate))
    wanted = "any recognized decoder" if not specs else f"architecture {specs[0].name!r}"
    if found.refusal is not None:
        raise _refuse(module, "a residual decoder", found.refusal, specs or ARCHITECTURES)
    if not specs and found.layout is not None:
        return found.layout
    return _static(module, specs or ARCHITECTURES, wanted, found.not_run or "no layer stack")


def _compile_patterns(patterns: Sequence[str]) -> List[re.Pattern[str]]:
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
    return compiled


def layout_from_patterns(module: nn.Module, patterns: Sequence[str],
                         depth: Optional[int] = None) -> DecoderLayout:
    """A layout from regular expressions matched (``re.fullmatch``) against parameter names.

    Each pattern's first group must capture the layer index (``r"layers\\.(\\d+)\\.proj\\.weight"``).
    ``depth`` defaults to the number of distinct layer indices matched. A pattern that matches
    nothing, a match without an integer layer index, or an index outside ``[0, depth)`` raises
    :class:`pydepth.ArchitectureError`."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    found: List[ResidualProjection] = []
    for rx in _compile_patterns(patterns):
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


def resolve_layout(module: nn.Module, architecture: Union[str, ArchitectureSpec, None],
                   patterns: Optional[Sequence[str]], depth: Optional[int]) -> DecoderLayout:
    """The layout from explicit patterns when given, else from the module's structure; a
    ``depth`` that differs from the layers found raises :class:`pydepth.ScalingSchemeError`."""
    if patterns is not None:
        if architecture is not None:
            raise ScalingSchemeError("give either architecture or patterns, not both")
        return layout_from_patterns(module, patterns, depth)
    layout = find_layout(module, architecture)
    if depth is not None and depth != layout.depth:
        raise ScalingSchemeError(f"depth {depth!r} differs from the {layout.depth} layers found in "
                                 f"the {layout.architecture} module")
    return layout
