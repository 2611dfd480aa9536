# SPDX-License-Identifier: MIT
"""The twin: pydepth's decoder as a torch ``nn.Module``, and exact conversions both ways.

Layout. pydepth stores every matrix as ``[in, out]`` and computes ``x @ W`` (the numerics
contract's ``MATMUL(an, Wq)``); the twin keeps that layout, so ``state_dict()`` holds exactly
pydepth's names and shapes and a round trip is a plain copy. ``nn.Linear`` (Hugging Face
Llama, Mistral, Qwen2, GPT-NeoX, nanoGPT, torchtitan) stores ``[out, in]`` and computes
``x @ W.T``: moving a matrix between the two is a transpose. Hugging Face's GPT-2 ``Conv1D``
is ``[in, out]`` like pydepth.

RoPE. pydepth rotates adjacent feature pairs ``(2j, 2j+1)`` of each head; Hugging Face Llama
rotates ``(j, j + D/2)`` ("rotate_half"). Both are the same rotation of a permuted basis, so a
Llama checkpoint runs in pydepth's convention only after the query and key output rows of every
head are permuted (head feature ``j`` and ``j + D/2`` become ``2j`` and ``2j+1``); values,
output projections and the feed-forward are unaffected. (Meta's original Llama checkpoints use
adjacent pairs; Hugging Face's conversion script applies the inverse permutation.)

Numerics. The twin follows the contract operation for operation in meaning (the reciprocal
RMS as ``exp(-0.5 * log(ms + eps))``, ``S * (1/sqrt(D))``, a causal softmax, tied head, mean
cross entropy over valid targets), but torch sums in BLAS order with FMA: in float64 it agrees
with pydepth to about 1e-13 relative, and pydepth stays the bit-exact one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple, Union

import numpy as np
import torch
from torch import nn

from .._checks import branch_tuple
from ..batch import Batch
from ..config import DecoderConfig
from ..errors import ParameterLayoutError, ParametrizationError
from ..model import DecoderModel, NamedParameter, _check_ids, _targets_array, _tokens_array

__all__ = ["PydepthTwin", "TwinOutput", "to_torch", "from_torch", "rope_tables"]


def rope_tables(config: DecoderConfig) -> Tuple[np.ndarray, np.ndarray]:
    """cos and sin tables ``[max_positions, head_width/2]`` built as the contract writes them
    (``pow`` per pair, ``angle = p * inv``, the C library's ``sin``/``cos``, canonical zeros)."""
    D, P = config.head_width, config.max_positions
    inv = [math.pow(config.rope_base, (-2.0 * j) / D) for j in range(D // 2)]
    cos: np.ndarray = np.empty((P, D // 2), dtype=np.float64)
    sin: np.ndarray = np.empty((P, D // 2), dtype=np.float64)
    for p in range(P):
        for j, f in enumerate(inv):
            angle = float(p) * f
            cos[p, j] = math.cos(angle) + 0.0  # + 0.0 turns -0.0 into +0.0 (canon)
            sin[p, j] = math.sin(angle) + 0.0
    return cos, sin


class _Projection(nn.Module):
    """A bias-free matrix in pydepth's ``[in, out]`` layout: ``y = x @ weight``."""

    def __init__(self, fan_in: int, fan_out: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(fan_in, fan_out, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, self.weight)


class _RMSNorm(nn.Module):
    """``x * exp(-0.5 * log(mean(x*x) + eps)) * gain`` over the last axis."""

    def __init__(self, width: int, eps: float, dtype: torch.dtype) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(width, dtype=dtype))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inverse_rms = torch.exp(torch.log((x * x).mean(dim=-1, keepdim=True) + self.eps) * -0.5)
        return x * inverse_rms * self.gain


class _Embedding(nn.Module):
    """The token table ``[V, W]``, used for lookup and (transposed) as the tied head."""

    def __init__(self, vocabulary: int, width: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(vocabulary, width, dtype=dtype))

    def forward(self, ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        rows = self.weight[ids]
        return torch.where(valid.unsqueeze(-1), rows, torch.zeros((), dtype=rows.dtype))


class _Attention(nn.Module):
    """Causal grouped-query self-attention with adjacent-pair RoPE."""

    def __init__(self, config: DecoderConfig, dtype: torch.dtype) -> None:
        super().__init__()
        w, kvd = config.model_width, config.kv_width
        self.query = _Projection(w, w, dtype)
        self.key = _Projection(w, kvd, dtype)
        self.value = _Projection(w, kvd, dtype)
        self.output = _Projection(w, w, dtype)
        self.heads, self.kv_heads, self.head_width = config.heads, config.kv_heads, config.head_width
        self.scale = 1.0 / math.sqrt(float(config.head_width))

    def _heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.reshape(B, T, n, self.head_width).transpose(1, 2)

    @staticmethod
    def _rope(a: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        left, right = a[..., 0::2], a[..., 1::2]
        return torch.stack((left * cos - right * sin, left * sin + right * cos), dim=-1).flatten(-2)

    def forward(self, an: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                allowed: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        B, T, W = an.shape
        group = self.heads // self.kv_heads
        q = self._rope(self._heads(self.query(an), self.heads), cos, sin)
        k = self._rope(self._heads(self.key(an), self.kv_heads), cos, sin)
        v = self._heads(self.value(an), self.kv_heads)
        if group > 1:  # query head h reads key/value head h // group
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)
        weights = torch.where(valid[:, None, :, None], weights, torch.zeros((), dtype=weights.dtype))
        merged = torch.matmul(weights, v).transpose(1, 2).reshape(B, T, W)
        return self.output(merged)


class _FeedForward(nn.Module):
    """SwiGLU: ``(silu(x @ gate) * (x @ up)) @ down``."""

    def __init__(self, config: DecoderConfig, dtype: torch.dtype) -> None:
        super().__init__()
        w, f = config.model_width, config.feed_forward_width
        self.gate = _Projection(w, f, dtype)
        self.up = _Projection(w, f, dtype)
        self.down = _Projection(f, w, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


class _Block(nn.Module):
    """Pre-norm block: ``aa = x + μ·attention(norm(x))``; ``out = aa + μ·ffn(norm(aa))``, the
    multiply skipped at μ = 1.0 (docs/numerics.md §5.9)."""

    def __init__(self, config: DecoderConfig, dtype: torch.dtype, branch: float = 1.0) -> None:
        super().__init__()
        self.branch = branch
        w, eps = config.model_width, config.rms_epsilon
        self.attention_norm = _RMSNorm(w, eps, dtype)
        self.attention = _Attention(config, dtype)
        self.ffn_norm = _RMSNorm(w, eps, dtype)
        self.ffn = _FeedForward(config, dtype)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                allowed: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        after_attention = x + self._scaled(self.attention(self.attention_norm(x), cos, sin, allowed, valid))
        return after_attention + self._scaled(self.ffn(self.ffn_norm(after_attention)))

    def _scaled(self, branch: torch.Tensor) -> torch.Tensor:
        return branch if self.branch == 1.0 else self.branch * branch


@dataclass
class TwinOutput:
    """What the twin's forward returns: logits ``[B, T, V]`` and the mean loss (or None)."""

    logits: torch.Tensor
    loss: Optional[torch.Tensor]


class PydepthTwin(nn.Module):
    """pydepth's decoder in eager PyTorch, with pydepth's parameter names and ``[in, out]``
    layout in ``state_dict()``. Build it with :func:`to_torch`. ``branch_multipliers`` as in
    :class:`pydepth.DecoderModel` (they are not tensors, so ``state_dict()`` leaves them out).

    ``forward(input_ids, targets=None)`` takes token ids ``[B, T]`` (tensor or array) or a
    :class:`pydepth.Batch` (packed segments, padding; its own targets), and returns a
    :class:`TwinOutput`; targets follow pydepth's convention (aligned with the inputs, as in
    ``fwd.loss(targets)``) and the loss is the mean cross entropy over valid targets."""

    def __init__(self, config: DecoderConfig, dtype: torch.dtype = torch.float64, *,
                 branch_multipliers: Any = None) -> None:
        super().__init__()
        if not isinstance(config, DecoderConfig):
            raise TypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        self.config = config
        branch = branch_tuple(config.layers, branch_multipliers, ParametrizationError) or (1.0,) * config.layers
        self.token_embedding = _Embedding(config.vocabulary_size, config.model_width, dtype)
        self.blocks = nn.ModuleList(_Block(config, dtype, mu) for mu in branch)
        self.final_norm = _RMSNorm(config.model_width, config.rms_epsilon, dtype)
        cos, sin = rope_tables(config)
        self.register_buffer("rope_cos", torch.from_numpy(cos).to(dtype), persistent=False)
        self.register_buffer("rope_sin", torch.from_numpy(sin).to(dtype), persistent=False)

    @property
    def branch_multipliers(self) -> Tuple[float, ...]:
        """Each block's residual-branch multiplier (1.0 where none)."""
        return tuple(block.branch for block in self.blocks)

    def _inputs(self, input_ids: Any, targets: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray,
                                                              np.ndarray, Optional[np.ndarray]]:
        """Checked ids, validity, positions, segment starts and targets (numpy, [B, T])."""
        cfg = self.config
        V = cfg.vocabulary_size
        if isinstance(input_ids, Batch):
            ids, valid_u8, pos, starts = input_ids._core_layout(cfg)
            shape = input_ids.shape
            valid: np.ndarray = valid_u8.astype(bool).reshape(shape)
            _check_ids(input_ids.tokens, ids, V, valid_u8)
            if targets is None:
                shown, tg = input_ids.targets, input_ids._core_targets()
            else:
                shown, tg = _targets_array(_numpy(targets), shape)
            _check_ids(shown, tg, V, valid_u8, targets=True)
            # padding ids are never looked up (the pad id may be any integer, e.g. -1 or 10**9)
            return (np.where(valid, ids, 0), valid, pos.astype(np.int64).reshape(shape),
                    starts.astype(np.int64).reshape(shape), np.where(valid, tg, 0))
        shown, ids = _tokens_array(_numpy(input_ids), cfg)
        _check_ids(shown, ids, V)
        B, T = ids.shape
        wanted: Optional[np.ndarray] = None
        if targets is not None:
            shown, wanted = _targets_array(_numpy(targets), (B, T))
            _check_ids(shown, wanted, V, targets=True)
        positions = np.broadcast_to(np.arange(T, dtype=np.int64), (B, T))
        return ids, np.ones((B, T), dtype=bool), positions, np.zeros((B, T), dtype=np.int64), wanted

    def forward(self, input_ids: Any, targets: Any = None) -> TwinOutput:
        """Logits and (with targets, or a Batch) the valid-target mean cross entropy."""
        ids_np, valid_np, pos_np, starts_np, tg_np = self._inputs(input_ids, targets)
        device = self.rope_cos.device
        ids, valid, pos, starts = (torch.from_numpy(np.array(a)).to(device)
                                   for a in (ids_np, valid_np, pos_np, starts_np))
        T = ids.shape[1]
        cos = self.rope_cos[pos].unsqueeze(1)  # [B, 1, T, D/2]
        sin = self.rope_sin[pos].unsqueeze(1)
        idx = torch.arange(T, device=device)
        allowed = ((idx[None, :, None] >= idx[None, None, :])
                   & (starts[:, :, None] == starts[:, None, :]) & valid[:, None, :])
        allowed = (allowed | torch.eye(T, dtype=torch.bool, device=device)).unsqueeze(1)
        x = self.token_embedding(ids, valid)
        for block in self.blocks:
            x = block(x, cos, sin, allowed, valid)
        logits = torch.matmul(self.final_norm(x), self.token_embedding.weight.t())
        loss = None
        if tg_np is not None:
            tg = torch.from_numpy(np.array(tg_np)).to(device)
            nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tg.reshape(-1), reduction="none")
            loss = nll[valid.reshape(-1)].sum() / float(int(valid_np.sum()))
        return TwinOutput(logits=logits, loss=loss)


def _numpy(values: Any) -> Any:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return values


def to_torch(model: DecoderModel, dtype: torch.dtype = torch.float64) -> PydepthTwin:
    """A :class:`PydepthTwin` holding copies of ``model``'s parameter values (exact in float64;
    rounded once in a narrower ``dtype``)."""
    if not isinstance(model, DecoderModel):
        raise TypeError(f"model must be a pydepth.DecoderModel, got {type(model).__name__}")
    twin = PydepthTwin(model.config, dtype, branch_multipliers=model.branch_multipliers)
    state = {p.name: torch.from_numpy(p.snapshot()).to(dtype) for p in model.parameters}
    with torch.no_grad():
        for name, tensor in twin.named_parameters():
            tensor.copy_(state[name])
    return twin


def from_torch(module_or_state_dict: Union[nn.Module, Mapping[str, torch.Tensor]],
               config: Optional[DecoderConfig] = None) -> DecoderModel:
    """A :class:`pydepth.DecoderModel` whose values equal the tensors of a twin (or a state
    dict with pydepth's names and ``[in, out]`` shapes) bit for bit, converted to float64.

    ``config`` may be omitted for a :class:`PydepthTwin`. Missing, unexpected or misshapen
    tensors raise :class:`pydepth.ParameterLayoutError` naming them; nothing is built then.
    A twin's branch multipliers go with it (a bare state dict has none)."""
    branch = None
    if isinstance(module_or_state_dict, nn.Module):
        if isinstance(module_or_state_dict, PydepthTwin):
            config = module_or_state_dict.config if config is None else config
            branch = module_or_state_dict.branch_multipliers
        state: Mapping[str, Any] = module_or_state_dict.state_dict()
    elif isinstance(module_or_state_dict, Mapping):
        state = module_or_state_dict
    else:
        raise TypeError(f"expected an nn.Module or a state dict, got {type(module_or_state_dict).__name__}")
    if not isinstance(config, DecoderConfig):
        raise TypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
    layout = config.parameter_layout()
    names = [n for n, _ in layout]
    missing = [n for n in names if n not in state]
    unexpected = [n for n in state if n not in set(names)]
    if missing or unexpected:
        raise ParameterLayoutError(f"state dict does not match the layout of {config}: missing "
                                   f"{missing[:5]}{'...' if len(missing) > 5 else ''}, unexpected "
                                   f"{unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")
    params: List[NamedParameter] = []
    for name, shape in layout:
        tensor = state[name]
        if not isinstance(tensor, torch.Tensor):
            raise ParameterLayoutError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tuple(tensor.shape) != shape:
            raise ParameterLayoutError(f"{name}: expected shape {shape} ([in, out] layout), got "
                                       f"{tuple(tensor.shape)}")
        if not tensor.dtype.is_floating_point:
            raise ParameterLayoutError(f"{name}: expected a floating tensor, got {tensor.dtype}")
        params.append(NamedParameter(name, tensor.detach().cpu().to(torch.float64).numpy()))
    # a twin of another depth fails the layout check above, never here
    return DecoderModel.from_parameters(config, params, branch_multipliers=branch)

