# SPDX-License-Identifier: MIT
"""An independent numpy implementation of docs/numerics.md (plain multi-head attention, unpacked rows).

It reproduces the reference core's initialization, forward pass, mean next-token loss
and hand-coded reverse pass (docs/numerics.md §2-§6) operation by operation, and
emits the ``pydepth-reference-trace-v1`` fixture schema (bit patterns as hex strings).

Rules followed throughout:

* every sum is sequential from ``+0.0`` in the stated index order; vectorization is only
  across independent outputs (``s = s + A[..., k] * B[..., k]`` in a Python loop over
  ``k``), never ``np.sum`` / ``@`` / ``np.dot`` / ``einsum``, which may reorder;
* numpy's elementwise ``+ - * /`` on float64 are single IEEE roundings (no FMA);
* transcendental functions are the reference platform's (glibc >= 2.28, x86-64 with FMA), one
  element at a time (numpy's ufuncs may use their own SIMD kernels): by default the C library's
  through Python's ``math``, which equals them only on that platform; the tests install
  pydepth.elementary (checked against that glibc by test_elementary.py) with
  ``use_elementary`` so the comparison holds on every platform and glibc build.

This module deliberately does not import pydepth.
"""
from __future__ import annotations

import math
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

# The elementary functions, swappable as a set (see the module docstring).
_ELEMENTARY = {"exp": math.exp, "log": math.log, "log1p": math.log1p, "sin": math.sin,
               "cos": math.cos, "pow": math.pow}


def use_elementary(**functions: Any) -> None:
    """Replace some of exp, log, log1p, sin, cos, pow (scalar float -> float callables)."""
    unknown = set(functions) - set(_ELEMENTARY)
    if unknown:
        raise ValueError(f"unknown elementary functions {sorted(unknown)}")
    _ELEMENTARY.update(functions)


def _exp(x: float) -> float:
    return _ELEMENTARY["exp"](x)


def _log(x: float) -> float:
    return _ELEMENTARY["log"](x)


def _log1p(x: float) -> float:
    return _ELEMENTARY["log1p"](x)


def _sin(x: float) -> float:
    return _ELEMENTARY["sin"](x)


def _cos(x: float) -> float:
    return _ELEMENTARY["cos"](x)


def _pow(x: float, y: float) -> float:
    return _ELEMENTARY["pow"](x, y)


_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_SELECTED = (".attention.output.weight", ".ffn.down.weight")


# ----------------------------------------------------------------------------- helpers

def bits_of(values: Any) -> List[str]:
    """16-lowercase-hex-digit bit patterns of float64 values, row-major."""
    arr = np.ascontiguousarray(np.asarray(values, dtype=np.float64)).reshape(-1)
    return [format(int(b), "016x") for b in arr.view(np.uint64)]


def float_bits(x: float) -> str:
    """The bit pattern of one float64 as 16 hex digits."""
    return struct.pack(">d", float(x)).hex()


def from_bits(hexes: Sequence[str], shape: Optional[Sequence[int]] = None) -> np.ndarray:
    """Inverse of :func:`bits_of`: float64 array from hex bit patterns."""
    arr = np.array([int(h, 16) for h in hexes], dtype=np.uint64).view(np.float64)
    return arr.reshape(tuple(shape)) if shape is not None else arr


def elementwise(fn, a: Any) -> np.ndarray:
    """Apply a scalar elementary function (see use_elementary) to every element of ``a``."""
    arr = np.asarray(a, dtype=np.float64)
    out = [fn(v) for v in arr.reshape(-1).tolist()]
    return np.array(out, dtype=np.float64).reshape(arr.shape)


def canon(a: np.ndarray) -> np.ndarray:
    """canon(v): +0.0 where v is +0.0 or -0.0, v unchanged elsewhere."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(a == 0.0, 0.0, a)


def canon_scalar(v: float) -> float:
    """Scalar canon: +0.0 for either zero, v otherwise."""
    return 0.0 if v == 0.0 else v


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """MATMUL: C[..., m, j] = sum_{k ascending} A[..., m, k] * B[..., k, j], from +0.0.

    Leading (batch) axes broadcast. Each product is rounded, then added (no FMA)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    kdim = a.shape[-1]
    assert b.shape[-2] == kdim, (a.shape, b.shape)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    acc = np.zeros((*batch, a.shape[-2], b.shape[-1]), dtype=np.float64)
    for k in range(kdim):
        acc = acc + a[..., :, k, None] * b[..., None, k, :]
    return acc


def sum_last(a: np.ndarray) -> np.ndarray:
    """Sequential sum over the last axis from +0.0 (ascending), last axis dropped."""
    a = np.asarray(a, dtype=np.float64)
    acc = np.zeros(a.shape[:-1], dtype=np.float64)
    for j in range(a.shape[-1]):
        acc = acc + a[..., j]
    return acc


def sum_first(a: np.ndarray) -> np.ndarray:
    """Sequential sum over the first axis from +0.0 (ascending), first axis dropped."""
    a = np.asarray(a, dtype=np.float64)
    acc = np.zeros(a.shape[1:], dtype=np.float64)
    for i in range(a.shape[0]):
        acc = acc + a[i]
    return acc


def back_x(u: np.ndarray, wt: np.ndarray) -> np.ndarray:
    """BACK_X(U, Wt)[.., i] = sum_{o ascending} U[.., o] * Wt[i, o] (activation adjoint)."""
    return matmul(u, np.ascontiguousarray(wt.T))


def wgrad(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """WGRAD(X[B,T,I], U[B,T,O]): per batch item sum over t, then add items in batch order."""
    per_item = matmul(np.ascontiguousarray(np.swapaxes(x, 1, 2)), u)   # [B, I, O], t ascending
    return sum_first(per_item)


# ----------------------------------------------------------------------------- random numbers

class SplitMix64:
    """SplitMix64 (docs/numerics.md §2.1): state advanced before mixing, seed is the raw state."""

    def __init__(self, seed: int) -> None:
        """Seed the generator: ``state = seed`` verbatim."""
        self.state = int(seed) & _MASK64

    def next_u64(self) -> int:
        """Advance the state and return the next mixed 64-bit output."""
        self.state = (self.state + _GOLDEN) & _MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)

    def next_unit(self) -> float:
        """Unit float in [0, 1): the top 53 bits times 2**-53 (both exact)."""
        return float(self.next_u64() >> 11) * (2.0 ** -53)


def xavier(rng: SplitMix64, fan_in: int, fan_out: int) -> np.ndarray:
    """Xavier-uniform ``[fan_in, fan_out]``: ``limit * (2u - 1)``, row-major draws."""
    limit = math.sqrt(6.0 / float(fan_in + fan_out))
    vals = [limit * (2.0 * rng.next_unit() - 1.0) for _ in range(fan_in * fan_out)]
    return np.array(vals, dtype=np.float64).reshape(fan_in, fan_out)


# ----------------------------------------------------------------------------- configuration

class Config:
    """Plain configuration record (the trace ``config`` keys); only kv_heads == heads."""

    def __init__(self, d: Mapping[str, Any]) -> None:
        """Read a trace-style config dict and derive D = W / H."""
        self.V = int(d["vocabulary_size"])
        self.W = int(d["model_width"])
        self.H = int(d["heads"])
        kv = d.get("kv_heads")
        assert kv is None or int(kv) == self.H, "this implementation covers kv_heads == heads only"
        self.F = int(d["feed_forward_width"])
        self.L = int(d["layers"])
        self.P = int(d["max_positions"])
        self.theta = float(d.get("rope_base", 10000.0))
        self.eps = float(d.get("rms_epsilon", 1e-6))
        assert self.W % self.H == 0 and (self.W // self.H) % 2 == 0
        self.D = self.W // self.H

    def parameter_count(self) -> int:
        """V*W + L*(2W + 4W^2 + 3WF) + W."""
        w = self.W
        return self.V * w + self.L * (2 * w + 4 * w * w + 3 * w * self.F) + w

    def draw_count(self) -> int:
        """V*W + L*(4W^2 + 3WF): number of 64-bit draws consumed by construction."""
        return self.V * self.W + self.L * (4 * self.W * self.W + 3 * self.W * self.F)


def init_parameters(cfg: Config, rng: SplitMix64) -> List[Tuple[str, np.ndarray]]:
    """Parameters in declaration order (docs/numerics.md §3.1), draws in the order of §3.2."""
    params = [("token_embedding.weight", xavier(rng, cfg.V, cfg.W))]
    w, f = cfg.W, cfg.F
    for i in range(cfg.L):
        p = f"blocks.{i}."
        wq, wk, wv, wo = (xavier(rng, w, w) for _ in range(4))
        wg = xavier(rng, w, f)
        wu = xavier(rng, w, f)
        wd = xavier(rng, f, w)
        params += [(p + "attention_norm.gain", np.ones(w)), (p + "attention.query.weight", wq),
                   (p + "attention.key.weight", wk), (p + "attention.value.weight", wv),
                   (p + "attention.output.weight", wo), (p + "ffn_norm.gain", np.ones(w)),
                   (p + "ffn.gate.weight", wg), (p + "ffn.up.weight", wu),
                   (p + "ffn.down.weight", wd)]
    params.append(("final_norm.gain", np.ones(w)))
    return params


def depth_factor(layers: int) -> float:
    """alpha = 1.0 / sqrt((double)L); +inf for L = 0 (as the C division 1.0/0.0 gives)."""
    root = math.sqrt(float(layers))
    return 1.0 / root if root != 0.0 else math.inf


def scale_selected(cfg: Config, params: List[Tuple[str, np.ndarray]]) -> List[Tuple[str, np.ndarray]]:
    """The ``initialized`` variant: output and down weights times alpha when L != 1."""
    if cfg.L == 1:
        return [(n, v.copy()) for n, v in params]
    alpha = depth_factor(cfg.L)
    return [(n, v * alpha if n.endswith(_SELECTED) else v.copy()) for n, v in params]


# ----------------------------------------------------------------------------- forward pieces

def rmsnorm_forward(x: np.ndarray, g: np.ndarray, eps: float) -> Dict[str, np.ndarray]:
    """RMSNorm (3.2): r = exp(-0.5 * log(mean_square + eps)); mean divides by W."""
    width = x.shape[-1]
    s = x * x
    m = (sum_last(s) / float(width))[..., None]          # [B, T, 1]
    z = m + eps
    lg = elementwise(_log, z)
    y = lg * -0.5
    r = elementwise(_exp, y)
    n = x * r
    o = n * g
    return {"x": x, "m": m, "z": z, "r": r, "n": n, "o": o}


def rope_tables(d_head: int, positions: int, theta: float) -> Tuple[np.ndarray, np.ndarray]:
    """SIN, COS tables [P, D/2]: inv[j] = pow(theta, (-2.0*j)/D), angle = p * inv[j]."""
    half = d_head // 2
    inv = [_pow(theta, (-2.0 * float(j)) / float(d_head)) for j in range(half)]
    sin = np.zeros((positions, half))
    cos = np.zeros((positions, half))
    for p in range(positions):
        for j in range(half):
            angle = float(p) * inv[j]
            sin[p, j] = canon_scalar(_sin(angle))
            cos[p, j] = canon_scalar(_cos(angle))
    return sin, cos


def rope_rotate(a: np.ndarray, sin: np.ndarray, cos: np.ndarray) -> np.ndarray:
    """ROPE on [B, H, T, D]: adjacent pairs (2j, 2j+1), position t uses table row t."""
    t = a.shape[2]
    s, c = sin[:t], cos[:t]                     # [T, D/2] broadcast over B, H
    left, right = a[..., 0::2], a[..., 1::2]
    out = np.empty_like(a)
    out[..., 0::2] = canon(left * c - right * s)
    out[..., 1::2] = canon(left * s + right * c)
    return out


def rope_inverse(u: np.ndarray, sin: np.ndarray, cos: np.ndarray) -> np.ndarray:
    """ROPE VJP on [B, H, T, D]: gl = canon(ul*c + ur*s), gr = canon(ur*c - ul*s)."""
    t = u.shape[2]
    s, c = sin[:t], cos[:t]
    ul, ur = u[..., 0::2], u[..., 1::2]
    out = np.empty_like(u)
    out[..., 0::2] = canon(ul * c + ur * s)
    out[..., 1::2] = canon(ur * c - ul * s)
    return out


def max_and_tail(row):
    """Plain-comparison maximum and the "1 + tail" sum of docs/numerics.md §5.4/§5.7: exp(v - max)
    summed from +0.0 in order, the first maximal entry left out (it is the literal 1.0)."""
    mx = -math.inf
    for v in row:
        mx = max(mx, v)
    tail = 0.0
    skipped = False
    for v in row:
        sh = v - mx
        if sh == 0.0 and not skipped:
            skipped = True
        else:
            tail = tail + _exp(sh)
    return mx, tail


def causal_softmax(x: np.ndarray) -> np.ndarray:
    """CAUSAL_SOFTMAX on [G, T, T]: prefix 0..i, first maximum excluded, den = 1 + tail."""
    g_count, t_len, _ = x.shape
    out = np.zeros_like(x)
    for g in range(g_count):
        for i in range(t_len):
            row = x[g, i, : i + 1].tolist()
            mx, tail = max_and_tail(row)
            den = 1.0 + tail
            for j, v in enumerate(row):
                out[g, i, j] = canon_scalar(_exp(v - mx) / den)
    return out


def causal_softmax_backward(u: np.ndarray, p: np.ndarray) -> np.ndarray:
    """CAUSAL_SOFTMAX VJP per row i: wsum over j <= i, g = canon(p*(u - wsum)), future 0."""
    g_count, t_len, _ = u.shape
    out = np.zeros_like(u)
    for g in range(g_count):
        for i in range(t_len):
            urow = u[g, i, : i + 1].tolist()
            prow = p[g, i, : i + 1].tolist()
            wsum = 0.0
            for uj, pj in zip(urow, prow):
                wsum = wsum + uj * pj
            for j, (uj, pj) in enumerate(zip(urow, prow)):
                out[g, i, j] = canon_scalar(pj * (uj - wsum))
    return out


def silu_forward(x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """SILU with the two-branch sigmoid; returns (x * sg, sg)."""
    flat = x.reshape(-1).tolist()
    sg = []
    for v in flat:
        if v >= 0.0:
            sg.append(1.0 / (1.0 + _exp(-v)))
        else:
            e = _exp(v)
            sg.append(e / (1.0 + e))
    sgs = np.array(sg, dtype=np.float64).reshape(x.shape)
    return x * sgs, sgs


def nll_mean(logits: np.ndarray, targets: np.ndarray) -> Tuple[float, np.ndarray]:
    """NLL_MEAN (3.7): log1p(tail) normalizer, prob saved, loss = canon(total / N).

    Includes the reference's ``sm`` fallback for non-finite per-group losses."""
    classes = logits.shape[-1]
    rows = logits.reshape(-1, classes)
    tgt = np.asarray(targets).reshape(-1)
    n = rows.shape[0]
    nf = float(n)
    prob = np.zeros_like(rows)
    total = 0.0
    sm = 0.0
    use_sm = False
    for g in range(n):
        row = rows[g].tolist()
        mx, tail = max_and_tail(row)
        lse = _log1p(tail)
        xt = row[int(tgt[g])]
        gap = mx - xt
        loss_g = gap + lse
        den = 1.0 + tail
        for c, v in enumerate(row):
            prob[g, c] = canon_scalar(_exp(v - mx) / den)
        sg = gap / nf if math.isfinite(gap) else mx / nf - xt / nf
        sm = sm + (sg + lse / nf)
        if not use_sm:
            if not math.isfinite(loss_g):
                use_sm = True
            else:
                total = total + loss_g
                if not math.isfinite(total):
                    use_sm = True
    loss = canon_scalar(sm) if use_sm else canon_scalar(total / nf)
    return loss, prob.reshape(logits.shape)


# ----------------------------------------------------------------------------- model

def to_lanes(y: np.ndarray, heads: int) -> np.ndarray:
    """[B, T, W] -> head layout [B, H, T, D] (q4 then TRANSPOSE(1, 2))."""
    b, t, w = y.shape
    return np.ascontiguousarray(y.reshape(b, t, heads, w // heads).transpose(0, 2, 1, 3))


def from_lanes(y: np.ndarray) -> np.ndarray:
    """[B, H, T, D] -> [B, T, W] with merged[b, t, h*D + d] = y[b, h, t, d]."""
    b, h, t, d = y.shape
    return np.ascontiguousarray(y.transpose(0, 2, 1, 3)).reshape(b, t, h * d)


def forward(cfg: Config, params: Mapping[str, np.ndarray], ids: np.ndarray,
            targets: np.ndarray, branch: Optional[Sequence[float]] = None) -> Dict[str, Any]:
    """Forward pass (docs/numerics.md §5) returning trace-named values plus what the reverse pass needs;
    ``branch`` holds each block's residual-branch multiplier (§5.9), None for none."""
    mus = [1.0] * cfg.L if branch is None else [float(v) for v in branch]
    ids = np.asarray(ids, dtype=np.int64)
    b_count, t_len = ids.shape
    assert 1 <= t_len <= cfg.P
    emb = params["token_embedding.weight"]
    sin, cos = rope_tables(cfg.D, cfg.P, cfg.theta)
    kappa = 1.0 / math.sqrt(float(cfg.D))
    named: List[Tuple[str, np.ndarray]] = []
    x = emb[ids].copy()                                   # GATHER: plain copy
    named.append(("embedding.output", x))
    sites = [x]
    blocks = []
    for i in range(cfg.L):
        p = f"blocks.{i}."
        an_f = rmsnorm_forward(x, params[p + "attention_norm.gain"], cfg.eps)
        an = an_f["o"]
        wq, wk = params[p + "attention.query.weight"], params[p + "attention.key.weight"]
        wv, wo = params[p + "attention.value.weight"], params[p + "attention.output.weight"]
        qh = to_lanes(matmul(an, wq), cfg.H)
        kh = to_lanes(matmul(an, wk), cfg.H)
        vh = to_lanes(matmul(an, wv), cfg.H)
        qr = rope_rotate(qh, sin, cos)
        kr = rope_rotate(kh, sin, cos)
        lanes = b_count * cfg.H
        ql = qr.reshape(lanes, t_len, cfg.D)
        kl = kr.reshape(lanes, t_len, cfg.D)
        vl = vh.reshape(lanes, t_len, cfg.D)
        scores = matmul(ql, np.ascontiguousarray(kl.transpose(0, 2, 1)))
        sc = scores * kappa
        pm = causal_softmax(sc)
        o = matmul(pm, vl)
        ho = o.reshape(b_count, cfg.H, t_len, cfg.D)
        mg = from_lanes(ho)
        ao = matmul(mg, wo)
        if mus[i] != 1.0:                                  # §5.9: mu * branch, rounded once
            ao = mus[i] * ao
        aa = x + ao
        fn_f = rmsnorm_forward(aa, params[p + "ffn_norm.gain"], cfg.eps)
        fn = fn_f["o"]
        gl = matmul(fn, params[p + "ffn.gate.weight"])
        gs, sg = silu_forward(gl)
        up = matmul(fn, params[p + "ffn.up.weight"])
        pr = gs * up
        dn = matmul(pr, params[p + "ffn.down.weight"])
        if mus[i] != 1.0:
            dn = mus[i] * dn
        out = aa + dn
        named += [(p + "attention_norm.mean_square", an_f["m"]),
                  (p + "attention_norm.inverse_rms", an_f["r"]),
                  (p + "attention_norm.normalized", an_f["n"]),
                  (p + "attention_norm.output", an),
                  (p + "attention.query_heads", qh), (p + "attention.key_heads", kh),
                  (p + "attention.value_heads", vh),
                  (p + "attention.rotated_query_heads", qr),
                  (p + "attention.rotated_key_heads", kr),
                  (p + "attention.weights", pm.reshape(b_count, cfg.H, t_len, t_len)),
                  (p + "attention.head_outputs", ho), (p + "attention.merged", mg),
                  (p + "attention.output", ao), (p + "after_attention", aa),
                  (p + "ffn_norm.output", fn), (p + "ffn.gate_linear", gl),
                  (p + "ffn.gate_silu", gs), (p + "ffn.up", up), (p + "ffn.product", pr),
                  (p + "ffn.output", dn), (p + "output", out)]
        blocks.append({"an_f": an_f, "ql": ql, "kl": kl, "vl": vl, "pm": pm, "mg": mg,
                       "fn_f": fn_f, "gl": gl, "gs": gs, "sg": sg, "up": up, "pr": pr})
        sites += [aa, out]
        x = out
    fo_f = rmsnorm_forward(x, params["final_norm.gain"], cfg.eps)
    fo = fo_f["o"]
    logits = matmul(fo, np.ascontiguousarray(emb.T))
    loss, prob = nll_mean(logits, targets)
    named += [("final_norm.output", fo), ("logits", logits),
              ("loss", np.array(loss, dtype=np.float64))]
    return {"named": named, "sites": sites, "blocks": blocks, "fo_f": fo_f, "prob": prob,
            "loss": loss, "ids": ids, "targets": np.asarray(targets).reshape(-1),
            "sin": sin, "cos": cos, "kappa": kappa, "branch": mus}


def rms_back(u: np.ndarray, f: Mapping[str, np.ndarray], g: np.ndarray):
    """RMS_BACK (4.6): returns (c_n, c_s, dg); dg is one flat sum over all rows."""
    x, r, z, n = f["x"], f["r"], f["z"], f["n"]
    width = x.shape[-1]
    u_n = u * g
    dg = sum_first((u * n).reshape(-1, width))
    c_n = u_n * r
    q = sum_last(u_n * x)[..., None]
    u_y = q * r
    u_lg = u_y * -0.5
    u_z = u_lg / z
    u_s = u_z / float(width)
    c_s = u_s * x
    return c_n, c_s, dg


def backward(cfg: Config, params: Mapping[str, np.ndarray], fw: Mapping[str, Any]):
    """Hand-coded reverse pass (4.6) with the accumulation orders of 4.5.

    Returns (site adjoints list, dict of parameter gradients)."""
    emb = params["token_embedding.weight"]
    prob = fw["prob"]
    b_count, t_len, v_count = prob.shape
    n = b_count * t_len
    scale = 1.0 / float(n)
    shifted = prob.reshape(n, v_count).copy()
    tgt = fw["targets"]
    for g in range(n):
        shifted[g, int(tgt[g])] = shifted[g, int(tgt[g])] - 1.0
    dlog = canon(shifted * scale).reshape(prob.shape)
    grads: Dict[str, np.ndarray] = {}
    fo = fw["fo_f"]["o"]
    dfo = matmul(dlog, emb)                                    # sum over v ascending
    de_head = np.ascontiguousarray(wgrad(fo, dlog).T)          # [V, W]
    c_n, c_s, dg = rms_back(dfo, fw["fo_f"], params["final_norm.gain"])
    grads["final_norm.gain"] = dg
    a = ((0.0 + c_n) + c_s) + c_s
    sites: List[np.ndarray] = [None] * (2 * cfg.L + 1)
    sin, cos, kappa, heads = fw["sin"], fw["cos"], fw["kappa"], cfg.H
    for i in range(cfg.L - 1, -1, -1):
        p = f"blocks.{i}."
        blk = fw["blocks"][i]
        sites[2 * i + 2] = a
        wd, wu, wg = (params[p + k] for k in ("ffn.down.weight", "ffn.up.weight", "ffn.gate.weight"))
        fn = blk["fn_f"]["o"]
        mu = fw["branch"][i]
        u_dn = a if mu == 1.0 else mu * a                  # §6.4: the unscaled product's adjoint
        d_pr = back_x(u_dn, wd)
        grads[p + "ffn.down.weight"] = wgrad(blk["pr"], u_dn)
        d_gs = d_pr * blk["up"]
        d_up = d_pr * blk["gs"]
        sg, gl = blk["sg"], blk["gl"]
        d_gl = d_gs * (sg * (1.0 + gl * (1.0 - sg)))
        grads[p + "ffn.up.weight"] = wgrad(fn, d_up)
        grads[p + "ffn.gate.weight"] = wgrad(fn, d_gl)
        d_fn = (0.0 + back_x(d_up, wu)) + back_x(d_gl, wg)
        c_n, c_s, dg = rms_back(d_fn, blk["fn_f"], params[p + "ffn_norm.gain"])
        grads[p + "ffn_norm.gain"] = dg
        aa_adj = (((0.0 + a) + c_n) + c_s) + c_s
        sites[2 * i + 1] = aa_adj
        wq, wk, wv, wo = (params[p + "attention." + k + ".weight"]
                          for k in ("query", "key", "value", "output"))
        u_ao = aa_adj if mu == 1.0 else mu * aa_adj
        d_mg = back_x(u_ao, wo)
        grads[p + "attention.output.weight"] = wgrad(blk["mg"], u_ao)
        lanes = b_count * heads
        d_o = to_lanes(d_mg, heads).reshape(lanes, t_len, cfg.D)
        ql, kl, vl, pm = blk["ql"], blk["kl"], blk["vl"], blk["pm"]
        d_pm = matmul(d_o, np.ascontiguousarray(vl.transpose(0, 2, 1)))      # sum over d
        d_vl = matmul(np.ascontiguousarray(pm.transpose(0, 2, 1)), d_o)      # sum over i
        d_sc = causal_softmax_backward(d_pm, pm)
        d_s = d_sc * kappa
        d_ql = matmul(d_s, kl)                                                # sum over j
        d_kl = matmul(np.ascontiguousarray(d_s.transpose(0, 2, 1)), ql)      # sum over i
        shape4 = (b_count, heads, t_len, cfg.D)
        dq = from_lanes(rope_inverse(d_ql.reshape(shape4), sin, cos))
        dk = from_lanes(rope_inverse(d_kl.reshape(shape4), sin, cos))
        dv = from_lanes(d_vl.reshape(shape4))
        an = blk["an_f"]["o"]
        grads[p + "attention.query.weight"] = wgrad(an, dq)
        grads[p + "attention.key.weight"] = wgrad(an, dk)
        grads[p + "attention.value.weight"] = wgrad(an, dv)
        d_an = ((0.0 + back_x(dv, wv)) + back_x(dk, wk)) + back_x(dq, wq)
        c_n, c_s, dg = rms_back(d_an, blk["an_f"], params[p + "attention_norm.gain"])
        grads[p + "attention_norm.gain"] = dg
        a = (((0.0 + aa_adj) + c_n) + c_s) + c_s
    sites[0] = a
    de_gather = np.zeros_like(emb)
    flat_ids = fw["ids"].reshape(-1)
    flat_a = a.reshape(n, cfg.W)
    for pos in range(n):
        row = int(flat_ids[pos])
        de_gather[row] = de_gather[row] + flat_a[pos]
    grads["token_embedding.weight"] = (0.0 + de_head) + de_gather
    # stored gradients start at +0.0: grad = 0.0 + adj
    grads = {k: 0.0 + v for k, v in grads.items()}
    return sites, grads


def plain_rms(x: np.ndarray) -> float:
    """rms = sqrt(sum_{row-major} v*v / count), sequential from +0.0 (docs/numerics.md §9)."""
    flat = np.asarray(x, dtype=np.float64).reshape(-1).tolist()
    s = 0.0
    for v in flat:
        s = s + v * v
    return math.sqrt(s / float(len(flat)))


def _entry(name: str, value: np.ndarray) -> Dict[str, Any]:
    """One trace entry {name, shape, bits}."""
    arr = np.asarray(value, dtype=np.float64)
    return {"name": name, "shape": list(arr.shape), "bits": bits_of(arr)}


def model_trace(cfg: Config, params: List[Tuple[str, np.ndarray]], ids: np.ndarray,
                targets: np.ndarray) -> Dict[str, Any]:
    """MODEL_TRACE of one parameter variant: parameters, forward, site adjoints, gradients."""
    pmap = dict(params)
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        fw = forward(cfg, pmap, ids, targets)
        sites, grads = backward(cfg, pmap, fw)
    return {
        "parameters": [_entry(n, v) for n, v in params],
        "forward": [_entry(n, v) for n, v in fw["named"]],
        "site_adjoints": [_entry(f"site.{i}", s) for i, s in enumerate(sites)],
        "parameter_gradients": [_entry(n, grads[n]) for n, _ in params],
        "site_activation_rms": [float_bits(plain_rms(s)) for s in fw["sites"]],
        "site_adjoint_rms": [float_bits(plain_rms(s)) for s in sites],
    }


def fixture_trace(config: Mapping[str, Any], seed: int, tokens: Any, targets: Any,
                  batch: int = 1) -> Dict[str, Any]:
    """A whole fixture in the reference-trace schema: header plus both variants (2.4)."""
    cfg = Config(config)
    ids = np.asarray(tokens, dtype=np.int64)
    if ids.ndim == 1:
        ids = ids.reshape(batch, -1)
    tgt = np.asarray(targets, dtype=np.int64).reshape(ids.shape)
    rng = SplitMix64(seed)
    base = init_parameters(cfg, rng)
    expected_state = (int(seed) + cfg.draw_count() * _GOLDEN) & _MASK64
    assert rng.state == expected_state, "draw count self-check (1.1)"
    return {
        "seed": int(seed),
        "initial_rng_state": str(int(seed) & _MASK64),
        "final_rng_state": str(rng.state),
        "factor": float_bits(depth_factor(cfg.L)),
        "token_shape": list(ids.shape),
        "tokens": [int(v) for v in ids.reshape(-1)],
        "targets": [int(v) for v in tgt.reshape(-1)],
        "parameter_count": cfg.parameter_count(),
        "initialized": model_trace(cfg, scale_selected(cfg, base), ids, tgt),
        "same_base_unscaled_control": model_trace(cfg, base, ids, tgt),
    }
