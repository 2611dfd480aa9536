# SPDX-License-Identifier: MIT
"""Cost of one residual-health observation of a scanned JAX decoder against one jitted
``value_and_grad`` training step of the same model and batch, in Flax Linen (nn.remat + nn.scan,
params stacked on axis 1), Flax NNX (nnx.vmap + nnx.scan) and Equinox (filter_vmap +
lax.scan, the batch vmapped in the loss).

    cd /tmp && python /path/to/benchmarks/bench_jax_observe.py [--repeats 9] [--width 256 --layers 12]
        [--libraries flax-linen]

Every side is compiled once (a warm-up each) and timed interleaved, with
``block_until_ready``:

* ``step``: ``jax.jit(jax.value_and_grad(loss))`` with respect to every parameter;
* ``sums``: ``jax.jit`` of :func:`pydepth.jax.residual_sums` (the reverse pass with respect to
  the site dummies only), plus turning its ``[L, 3, 5]`` sums into the report on the host;
* ``public``: the public :func:`pydepth.jax.observe_residual_health` as a loop calls it (its
  compiled observer cached after the warm-up): checkpointed regions keep their residuals;
* ``recompute``: the same with ``recompute=True`` (the model's own remat: one more forward).

Prints the machine's no-FMA multiply-add line (bench_peak.py), medians, the ratios and every
sample (float64, x64 on).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import flax.linen as nn  # noqa: E402
from flax import nnx  # noqa: E402

from pydepth.jax import ResidualSites, observe_residual_health, report_from_sums, residual_sums  # noqa: E402

F64 = jnp.float64


def attend(x: Any, wqkv: Any, wo: Any, heads: int) -> Any:
    """Causal attention on [..., T, W] with a fused qkv matrix."""
    t = x.shape[-2]
    q, k, v = (a.reshape((*a.shape[:-1], heads, -1)) for a in jnp.split(x @ wqkv, 3, axis=-1))
    s = jnp.einsum("...qhd,...khd->...hqk", q, k) / jnp.sqrt(q.shape[-1])
    s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
    return jnp.einsum("...hqk,...khd->...qhd", jax.nn.softmax(s, -1), v).reshape(x.shape) @ wo


def xent(logits: Any, tokens: Any) -> Any:
    logp = jax.nn.log_softmax(logits[..., :-1, :])
    return -jnp.mean(jnp.take_along_axis(logp, tokens[..., 1:, None], axis=-1))


def linen_case(v: int, w: int, heads: int, layers: int, tokens: Any) -> Tuple[Callable, Any, ResidualSites]:
    init = nn.initializers.normal(0.02)

    class Attn(nn.Module):
        @nn.compact
        def __call__(self, x):
            return attend(x, self.param("qkv", init, (w, 3 * w), F64), self.param("o", init, (w, w), F64), heads)

    class Layer(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            h = x + Attn(name="attn")(nn.RMSNorm(param_dtype=F64, name="n1")(x))
            up = nn.Dense(4 * w, use_bias=False, param_dtype=F64, kernel_init=init, name="up")
            down = nn.Dense(w, use_bias=False, param_dtype=F64, kernel_init=init, name="down")
            return h + down(jax.nn.gelu(up(nn.RMSNorm(param_dtype=F64, name="n2")(h)))), None

    class Model(nn.Module):
        @nn.compact
        def __call__(self, toks):
            emb = nn.Embed(v, w, param_dtype=F64, embedding_init=init, name="embed")
            stack = nn.scan(nn.remat(Layer, prevent_cse=False), variable_axes={"params": 1},
                            split_rngs={"params": True}, in_axes=nn.broadcast, length=layers)
            x, _ = stack(name="layers")(emb(toks), None)
            return emb.attend(nn.RMSNorm(param_dtype=F64, name="norm")(x))

    model = Model()
    variables = jax.jit(model.init)(jax.random.PRNGKey(0), tokens)
    return (lambda var, toks: xent(model.apply(var, toks), toks)), variables, \
        ResidualSites("layers", "attn", layer_axis=1)


def nnx_case(v: int, w: int, heads: int, layers: int, tokens: Any) -> Tuple[Callable, Any, ResidualSites]:
    kw = {"param_dtype": F64, "dtype": F64, "use_bias": False, "kernel_init": nnx.initializers.normal(0.02)}

    class Attn(nnx.Module):
        def __init__(self, rngs):
            self.qkv, self.o = nnx.Linear(w, 3 * w, rngs=rngs, **kw), nnx.Linear(w, w, rngs=rngs, **kw)

        def __call__(self, x):
            return attend(x, self.qkv.kernel[...], self.o.kernel[...], heads)

    class Layer(nnx.Module):
        def __init__(self, rngs):
            self.n1 = nnx.RMSNorm(w, param_dtype=F64, dtype=F64, rngs=rngs)
            self.attn = Attn(rngs)
            self.n2 = nnx.RMSNorm(w, param_dtype=F64, dtype=F64, rngs=rngs)
            self.up, self.down = nnx.Linear(w, 4 * w, rngs=rngs, **kw), nnx.Linear(4 * w, w, rngs=rngs, **kw)

        def __call__(self, x):
            h = x + self.attn(self.n1(x))
            return h + self.down(jax.nn.gelu(self.up(self.n2(h))))

    class Model(nnx.Module):
        def __init__(self):
            self.embed = nnx.Embed(v, w, param_dtype=F64, dtype=F64, rngs=nnx.Rngs(0))
            self.layers = nnx.vmap(lambda k: Layer(nnx.Rngs(k)))(jax.random.split(jax.random.PRNGKey(1), layers))
            self.norm = nnx.RMSNorm(w, param_dtype=F64, dtype=F64, rngs=nnx.Rngs(2))

        def __call__(self, toks):
            run = nnx.scan(lambda x, layer: layer(x), in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
            return self.embed.attend(self.norm(run(self.embed(toks), self.layers)))

    return (lambda m, toks: xent(m(toks), toks)), Model(), ResidualSites("layers", "attn", layer_axis=0)


def equinox_case(v: int, w: int, heads: int, layers: int, tokens: Any) -> Tuple[Callable, Any, ResidualSites]:
    class Attn(eqx.Module):
        qkv: Any
        o: Any

        def __call__(self, x):
            return attend(x, self.qkv, self.o, heads)

    class Norm(eqx.Module):
        g: Any

        def __call__(self, x):
            return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * self.g

    class Layer(eqx.Module):
        n1: Norm
        attn: Attn
        n2: Norm
        up: Any
        down: Any

        def __init__(self, key):
            k = jax.random.split(key, 4)
            r = lambda i, s: 0.02 * jax.random.normal(k[i], s, F64)  # noqa: E731
            self.n1, self.n2 = Norm(jnp.ones(w, F64)), Norm(jnp.ones(w, F64))
            self.attn = Attn(r(0, (w, 3 * w)), r(1, (w, w)))
            self.up, self.down = r(2, (w, 4 * w)), r(3, (4 * w, w))

        def __call__(self, x):
            h = x + self.attn(self.n1(x))
            return h + jax.nn.gelu(self.n2(h) @ self.up) @ self.down

    class Model(eqx.Module):
        embed: Any
        layers: Layer

        def __call__(self, toks):
            params, static = eqx.partition(self.layers, eqx.is_array)
            x = jax.lax.scan(lambda h, p: (eqx.combine(p, static)(h), None), self.embed[toks], params)[0]
            return x @ self.embed.T

    model = Model(0.02 * jax.random.normal(jax.random.PRNGKey(0), (v, w), F64),
                  eqx.filter_vmap(Layer)(jax.random.split(jax.random.PRNGKey(1), layers)))
    return (lambda m, toks: xent(jax.vmap(m)(toks), toks)), model, ResidualSites("layers", "attn", layer_axis=0)


def _compiled(library: str, loss_fn: Callable, model: Any, sites: ResidualSites) -> Tuple[Callable, Callable]:
    """(training step, observation) closures, both jitted, each returning host-ready results."""
    if library == "flax-nnx":
        graphdef, state = nnx.split(model)
        step_jit = jax.jit(jax.value_and_grad(lambda s, t: loss_fn(nnx.merge(graphdef, s), t)))
        obs_jit = jax.jit(lambda s, t: residual_sums(loss_fn, nnx.merge(graphdef, s), t, sites=sites))
        return (lambda t: step_jit(state, t)), (lambda t: obs_jit(state, t))
    if library == "equinox":
        step_jit = eqx.filter_jit(eqx.filter_value_and_grad(loss_fn))
        obs_jit = eqx.filter_jit(lambda m, t: residual_sums(loss_fn, m, t, sites=sites))
        return (lambda t: step_jit(model, t)), (lambda t: obs_jit(model, t))
    step_jit = jax.jit(jax.value_and_grad(loss_fn))
    obs_jit = jax.jit(lambda var, t: residual_sums(loss_fn, var, t, sites=sites))
    return (lambda t: step_jit(model, t)), (lambda t: obs_jit(model, t))


def measure(library: str, case: Callable, args: argparse.Namespace) -> Dict[str, Any]:
    """Medians of the step, of the sums in a jit (+ host report) and of the public call, interleaved."""
    tokens = jax.random.randint(jax.random.PRNGKey(3), (args.batch, args.tokens), 0, args.vocab)
    loss_fn, model, sites = case(args.vocab, args.width, args.heads, args.layers, tokens)
    step, observe = _compiled(library, loss_fn, model, sites)

    def run_step() -> None:
        jax.block_until_ready(step(tokens))

    def run_observe() -> None:
        report_from_sums(jax.device_get(observe(tokens)), attention=True)

    def run_public() -> None:
        observe_residual_health(loss_fn, model, tokens, sites=sites)

    def run_recompute() -> None:
        observe_residual_health(loss_fn, model, tokens, sites=sites, recompute=True)

    samples: Dict[str, List[float]] = {"step": [], "sums": [], "public": [], "recompute": []}
    sides = (("step", run_step), ("sums", run_observe), ("public", run_public), ("recompute", run_recompute))
    for _, fn in sides:
        fn()  # compile each
    for _ in range(args.repeats):
        for name, fn in sides:
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    med = {name: statistics.median(v) for name, v in samples.items()}
    return {"library": library, "step_s": med["step"], "observe_s": med["sums"], "public_s": med["public"],
            "recompute_s": med["recompute"], "ratio": med["sums"] / med["step"],
            "public_ratio": med["public"] / med["step"], "recompute_ratio": med["recompute"] / med["step"],
            "samples": samples}


def xla_counts(library: str, case: Callable, args: argparse.Namespace) -> Dict[str, Tuple[float, float]]:
    """XLA's cost analysis (GFLOP, GB accessed) of the compiled step, sums and sums with the
    model's own remat: the work, independent of the machine's load."""
    tokens = jax.random.randint(jax.random.PRNGKey(3), (args.batch, args.tokens), 0, args.vocab)
    loss_fn, model, sites = case(args.vocab, args.width, args.heads, args.layers, tokens)
    if library != "flax-linen":
        raise SystemExit("--flops measures the flax-linen case only")
    fns = {"step": jax.value_and_grad(loss_fn),
           "sums": lambda v, t: residual_sums(loss_fn, v, t, sites=sites),
           "sums recompute": lambda v, t: residual_sums(loss_fn, v, t, sites=sites, recompute=True)}
    out = {}
    for name, fn in fns.items():
        cost = jax.jit(fn).lower(model, tokens).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        out[name] = (float(cost["flops"]) / 1e9, float(cost["bytes accessed"]) / 1e9)
    return out


def peak_line() -> str:
    """The machine line: bench_peak.py's no-FMA multiply-add rate on one thread."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_peak import PeakError, machine_peak
    try:
        peak = machine_peak([1])
    except PeakError as exc:
        return f"machine peak unavailable ({exc})"
    return f"machine peak (bench_peak.py, {peak['isa']}, 1 thread): {peak['gflops'][1]:.1f} GFLOP/s mul + add, no FMA"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "unknown CPU")
    except OSError:
        return "unknown CPU"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the measurement; prints a table (and JSON with --json)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9, help="samples of each (default 9)")
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--libraries", default="flax-linen,flax-nnx,equinox", help="comma-separated subset")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--flops", action="store_true", help="print XLA's FLOP and byte counts instead of timing")
    args = ap.parse_args(argv)
    if args.flops:
        counts = xla_counts(args.libraries.split(",")[0], linen_case, args)
        for name, (gflop, gb) in counts.items():
            print(f"{name:<15} {gflop:8.3f} GFLOP {gflop / counts['step'][0]:6.3f} x step  {gb:7.3f} GB accessed")
        return 0
    print(f"{platform.processor() or platform.machine()}, {_cpu_name()}; {peak_line()}")
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, float64; width {args.width}, {args.layers} layers, "
          f"{args.heads} heads, vocabulary {args.vocab}, batch {args.batch} x {args.tokens} tokens")
    cases = {"flax-linen": linen_case, "flax-nnx": nnx_case, "equinox": equinox_case}
    rows = [measure(name, cases[name], args) for name in args.libraries.split(",")]
    print(f"{'library':<11} {'step ms':>9} {'sums ms':>9} {'public ms':>10} {'recompute ms':>13} {'sums/step':>10} "
          f"{'public/step':>12} {'recompute/step':>15}")
    for r in rows:
        print(f"{r['library']:<11} {1e3 * r['step_s']:9.2f} {1e3 * r['observe_s']:9.2f} {1e3 * r['public_s']:10.2f} "
              f"{1e3 * r['recompute_s']:13.2f} {r['ratio']:10.2f} {r['public_ratio']:12.2f} "
              f"{r['recompute_ratio']:15.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
