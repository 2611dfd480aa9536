# SPDX-License-Identifier: MIT
"""Decoder benchmark of issue 7: pydepth versus PyTorch float64 eager, interleaved.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_decoder.py \
        [--shapes issue3,tiny,small,medium,large,laptop] [--threads 1,2] [--repeat N] \
        [--quick] [--no-scaling] [--cell-budget SECONDS] [--json out.json]

For every shape two long-lived worker processes are started, one importing only pydepth
and one importing only torch (plus numpy), so each reports its own peak RSS
(resource.getrusage ru_maxrss). The parent sends them the same commands in alternating
order (pydepth first on even repetitions, torch first on odd ones), so machine noise
hits both frameworks alike. Both workers build bit-identical parameters: pydepth from
its C SplitMix64/Xavier construction, torch from a numpy reproduction of that stream
(benchmarks/torch_decoder.py checks it bit for bit), so they compute the same function.

Timed operations (one "step"; the median over repetitions is reported):
  construct   build a fresh model with Xavier init (pydepth: DecoderModel(cfg, rng);
              torch: allocate + uniform_ with torch's generator), then drop it
  fwd_nograd  forward + mean loss + .item() without recording (no_grad in both)
  fwd_record  forward + mean loss + .item() recording the graph, graph dropped
  fwd_bwd     a training step: zero_grad + recorded forward + loss + backward + .item(). pydepth
              runs it as its one call, DecoderModel.train_step(x, y) (the training record);
              with --keep all, as the five calls with forward(keep="all")
  fwd_bwd_calls  the same step as pydepth's five separate calls (zero_grad(), forward(keep=...),
              loss(), backward(), item()); torch runs its fwd_bwd step
Fast steps are looped inside one repetition (timeit style, about 20 ms per repetition,
50 ms in the scaling series)
and the per-step mean of that loop is one sample. A repetition that takes more than a
second also serves as its own warm-up; shorter ones get about WARMUP_SECONDS of untimed
warm-up runs.

Before timing, torch and pydepth loss and gradients are compared on the tiny and small
shapes (relative agreement must be below 1e-10). The scaling series (fwd_bwd only, at the
first thread count) varies depth 1..64 at the tiny width and T 16..1024 at the medium
width. --quick uses fewer repetitions, skips the laptop shape and shortens the series.

The machine line (bench_peak.machine_peak(), best of PEAK_ROUNDS runs per cell) is measured
before and after the shapes; both are printed and the higher is the line of every share. The
targets printed are those of this CPU's kind (cpu_kind(): Intel, AMD Zen or other; --cpu-kind
judges by another's), each torch-ratio verdict with pydepth's share of the line beside it.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import platform
import resource
import select
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# name: (vocab, width, heads, ff, layers, max_positions, kv_heads, T)
SHAPES: Dict[str, Dict[str, Any]] = {
    "issue3": dict(V=266, W=4, H=1, F=4, L=8, P=4, kv=None, T=4, seed=4701,
                   tokens=[[0, 99, 100, 101]], targets=[[99, 100, 101, 1]]),
    "tiny": dict(V=266, W=4, H=1, F=4, L=8, P=4, kv=None, T=4),
    "small": dict(V=266, W=16, H=2, F=20, L=2, P=16, kv=None, T=16),
    "medium": dict(V=4096, W=128, H=4, F=384, L=4, P=128, kv=None, T=128),
    "large": dict(V=16384, W=512, H=8, F=1536, L=2, P=256, kv=None, T=256),
    "laptop": dict(V=16384, W=512, H=8, F=1536, L=8, P=512, kv=2, T=512),
}
DEFAULT_SHAPES = ["issue3", "tiny", "small", "medium", "large", "laptop"]
OPS = ["construct", "fwd_nograd", "fwd_record", "fwd_bwd", "fwd_bwd_calls"]
# Minimum torch/pydepth ratio of fwd_bwd at every thread count, on every CPU (issues 7, 17, 26).
TARGETS = {"tiny": 100.0, "small": 50.0}
# Minimum torch/pydepth ratio of fwd_bwd by CPU kind (cpu_kind()), at 1 and 2 threads (issue 39):
# where a multiply and an add share the FMA ports (Intel) torch's ceiling is twice pydepth's.
VENDOR_TARGETS: Dict[str, Dict[str, float]] = {
    "intel": {"medium": 1.0, "large": 1.0, "laptop": 1.0},
    "amd_zen": {"medium": 2.0, "large": 2.0, "laptop": 2.0},
    "other": {},
}
KIND_NOTES = {"intel": "≥ torch at medium, large, laptop, 1 and 2 threads",
              "amd_zen": "≥ 2× torch from medium up", "other": "the share targets only"}
ZEN_FIRST_FAMILY = 23  # AMD family 17h is Zen 1; 19h Zen 3/4, 1Ah Zen 5
SPEEDUP_2T = {"medium": 1.7, "large": 1.8, "laptop": 1.8}  # issue 26: 1.7 at medium
# issue 26: share of the no-FMA mul+add line at 1 thread
PEAK_FRACTIONS = {"medium": 0.70, "large": 0.85, "laptop": 0.85}
RSS_FRACTION = 0.8  # issue 26: laptop-plan peak RSS at most this fraction of torch's
LAPTOP_MAX_REPEAT = 3
PEAK_ROUNDS = 5  # separate runs of the line before and after the shapes, each cell's best kept
DEPTHS = [1, 2, 4, 8, 16, 32, 64]
LENGTHS = [16, 32, 64, 128, 256, 512, 1024]
LOOP_TARGET_SECONDS = 0.02
# Steps shorter than this get an untimed warm-up loop of about this long per cell, and the loop
# length of the samples is planned from it: planned from the slow first call alone, the first
# cell of a fresh worker looped too few steps per sample and came out up to 2x slow.
WARMUP_SECONDS = 0.3
# Idle pause before every timed sample: the other worker's threads stop spinning first. torch's
# OpenMP threads spin for milliseconds after each of its ops (libgomp's default GOMP_SPINCOUNT),
# and a sample started inside that spin lost one of two cores (medium at 2 threads: 20 ms, not 15).
SETTLE_SECONDS = 0.05
SERIES_LOOP_TARGET = 0.05  # longer loops: the depth series resolves ~10 µs per block
LAPTOP_OPS = ["construct", "fwd_nograd", "fwd_bwd"]
GC_NOTE = ("Both workers run gc.collect() (untimed) before every sample, as timeit does between "
           "repetitions.")


# ----------------------------------------------------------------------------- workers

def _tokens(spec: Dict[str, Any]):
    """int64 tokens and targets [1, T] of a shape (deterministic)."""
    import numpy as np
    if "tokens" in spec:
        return (np.array(spec["tokens"], dtype=np.int64), np.array(spec["targets"], dtype=np.int64))
    t, v = spec["T"], spec["V"]
    seq = (np.arange(t + 1, dtype=np.int64) * 7919 + 11) % v
    return seq[:-1].reshape(1, t).copy(), seq[1:].reshape(1, t).copy()


class PydepthRunner:
    """Builds and steps a pydepth model for one shape."""

    def __init__(self) -> None:
        import pydepth
        self.pd = pydepth
        self.model: Any = None
        self.spec: Dict[str, Any] = {}

    def set_threads(self, n: int) -> None:
        """Sets the C kernels' thread count."""
        self.pd.set_num_threads(n)

    def _config(self) -> Any:
        s = self.spec
        return self.pd.DecoderConfig(s["V"], s["W"], s["H"], s["F"], s["L"], s["P"], kv_heads=s["kv"])

    def load(self, spec: Dict[str, Any]) -> Dict[str, Any]:
        """Builds the working model (seeded) and the token arrays."""
        self.model = None
        self.spec = spec
        self.x, self.y = _tokens(spec)
        self.model = self.pd.DecoderModel(self._config(), self.pd.SplitMix64(spec.get("seed", 1)))
        return {"parameters": self.model.parameter_count}

    def step(self, op: str) -> Callable[[], float]:
        """The callable for one timed operation; it returns the loss (or 0.0)."""
        pd, m, x, y = self.pd, self.model, self.x, self.y
        seed = self.spec.get("seed", 1)
        cfg = self._config()

        def construct() -> float:
            model = pd.DecoderModel(cfg, pd.SplitMix64(seed))
            del model
            return 0.0

        def fwd_nograd() -> float:
            with pd.no_grad():
                return m.forward(x).loss(y).item()

        def fwd_record() -> float:
            f = m.forward(x)
            v = f.loss(y).item()
            del f
            return v

        keep = self.spec.get("keep", "training")

        def fwd_bwd_calls() -> float:
            m.zero_grad()
            loss = m.forward(x, keep=keep).loss(y)
            loss.backward()
            return loss.item()

        def train_step() -> float:
            return m.train_step(x, y)

        # the step as pydepth's one call; train_step always keeps the training record
        fwd_bwd = train_step if keep == "training" else fwd_bwd_calls
        return {"construct": construct, "fwd_nograd": fwd_nograd, "fwd_record": fwd_record,
                "fwd_bwd": fwd_bwd, "fwd_bwd_calls": fwd_bwd_calls}[op]


class TorchRunner:
    """Builds and steps the torch twin for one shape (pydepth is never imported here)."""

    def __init__(self) -> None:
        import torch
        sys.path.insert(0, HERE)
        import torch_decoder
        self.torch = torch
        self.td = torch_decoder
        self.model: Any = None

    def set_threads(self, n: int) -> None:
        """Sets torch's intra-op thread count."""
        self.torch.set_num_threads(n)

    def load(self, spec: Dict[str, Any]) -> Dict[str, Any]:
        """Builds the working model with pydepth's exact initial values."""
        self.model = None
        self.spec = spec
        self.cfg = self.td.TorchConfig(spec["V"], spec["W"], spec["H"], spec["F"], spec["L"],
                                       spec["P"], kv_heads=spec["kv"])
        x, y = _tokens(spec)
        self.x, self.y = self.torch.from_numpy(x), self.torch.from_numpy(y)
        values, _ = self.td.splitmix64_xavier(spec.get("seed", 1), self.cfg.parameter_layout())
        self.model = self.td.TorchDecoder.from_arrays(self.cfg, values)
        del values
        return {"parameters": sum(p.numel() for p in self.model.parameters())}

    def step(self, op: str) -> Callable[[], float]:
        """The callable for one timed operation; it returns the loss (or 0.0)."""
        torch, m, x, y, cfg = self.torch, self.model, self.x, self.y, self.cfg
        seed = self.spec.get("seed", 1)

        def construct() -> float:
            model = self.td.TorchDecoder.random(cfg, seed)
            del model
            return 0.0

        def fwd_nograd() -> float:
            with torch.no_grad():
                return m.loss(x, y).item()

        def fwd_record() -> float:
            loss = m.loss(x, y)
            v = loss.item()
            del loss
            return v

        def fwd_bwd() -> float:
            m.zero_grad()
            loss = m.loss(x, y)
            loss.backward()
            return loss.item()

        return {"construct": construct, "fwd_nograd": fwd_nograd, "fwd_record": fwd_record,
                "fwd_bwd": fwd_bwd, "fwd_bwd_calls": fwd_bwd}[op]  # torch's training step either way


def _rss_mb() -> float:
    """Peak resident set size of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def worker_main(framework: str) -> int:
    """Serves JSON-line commands on stdin: threads, load, time, rss, quit."""
    out = sys.stdout
    sys.stdout = sys.stderr  # keep the protocol channel clean
    runner = PydepthRunner() if framework == "pydepth" else TorchRunner()
    base_rss = _rss_mb()
    for line in sys.stdin:
        cmd = json.loads(line)
        kind = cmd["cmd"]
        if kind == "threads":
            runner.set_threads(cmd["n"])
            reply: Dict[str, Any] = {"ok": True}
        elif kind == "load":
            reply = runner.load(cmd["spec"])
        elif kind == "time":
            fn = runner.step(cmd["op"])
            number = cmd["number"]
            gc.collect()  # untimed, as between timeit repetitions; see GC_NOTE
            t0 = time.perf_counter()
            for _ in range(number):
                value = fn()
            reply = {"seconds": (time.perf_counter() - t0) / number, "value": value}
        elif kind == "info":
            mod = runner.pd if framework == "pydepth" else runner.torch
            reply = {"version": getattr(mod, "__version__", "?"), "file": mod.__file__,
                     "threads": mod.get_num_threads()}
            if framework == "pydepth":  # the products' instruction-set path (baseline, avx2, avx512, neon)
                from pydepth._native._runtime import kernel_path
                reply["kernel_path"] = kernel_path()
        elif kind == "rss":
            reply = {"peak_mb": _rss_mb(), "import_mb": base_rss}
        elif kind == "quit":
            break
        else:
            reply = {"error": f"unknown command {kind}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


# ----------------------------------------------------------------------------- parent

class WorkerError(RuntimeError):
    """A worker died or did not answer within the timeout (e.g. a hung thread pool)."""


class Worker:
    """A worker subprocess speaking the JSON-line protocol."""

    timeout = 900.0  # seconds one command may take; set from --timeout

    def __init__(self, framework: str) -> None:
        self.framework = framework
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", framework],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def call(self, **cmd: Any) -> Dict[str, Any]:
        """Sends one command and waits for its reply; kills the worker after the timeout."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            raise WorkerError(f"{self.framework} worker gave no answer to {cmd} within {self.timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerError(f"{self.framework} worker died (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        """Asks the worker to exit and reaps it."""
        if self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, WorkerError, ValueError):
                self.call(cmd="quit")
        self.proc.wait()


def measure_interleaved(workers: Sequence[Worker], op: str, repeat: int, budget: float,
                        min_repeat: int = 1, loop_target: float = LOOP_TARGET_SECONDS) -> Dict[str, Dict[str, Any]]:
    """Times `op` in every worker, alternating who goes first, with per-framework repeats
    capped so that one framework spends about `budget` seconds on the cell (but at least
    min(min_repeat, repeat) samples)."""
    first: Dict[str, Dict[str, Any]] = {}
    planning: Dict[str, float] = {}
    for w in workers:  # calibration run; doubles as warm-up unless it is long
        first[w.framework] = w.call(cmd="time", op=op, number=1)
        t = first[w.framework]["seconds"]
        if t < WARMUP_SECONDS:  # a first call is slow: plan the loop length from warm calls
            warm = w.call(cmd="time", op=op, number=max(1, int(WARMUP_SECONDS / max(t, 1e-7))))
            planning[w.framework] = warm["seconds"]
    plan: Dict[str, Tuple[int, int]] = {}
    samples: Dict[str, List[float]] = {w.framework: [] for w in workers}
    for w in workers:
        t = max(planning.get(w.framework, first[w.framework]["seconds"]), 1e-7)
        number = max(1, int(loop_target / t)) if t < loop_target else 1
        reps = max(1, min(repeat, max(min_repeat, int(budget / (t * number)))))
        if t >= 1.0:  # a long run is its own warm-up: keep it
            samples[w.framework].append(first[w.framework]["seconds"])
            reps = max(0, reps - 1)
        plan[w.framework] = (number, reps)
    i = 0
    while any(len(samples[w.framework]) < plan[w.framework][1] + (first[w.framework]["seconds"] >= 1.0)
              for w in workers):
        order = workers if i % 2 == 0 else list(reversed(workers))
        for w in order:
            number, reps = plan[w.framework]
            done = len(samples[w.framework]) - (first[w.framework]["seconds"] >= 1.0)
            if done < reps:
                time.sleep(SETTLE_SECONDS)
                samples[w.framework].append(w.call(cmd="time", op=op, number=number)["seconds"])
        i += 1
    return {w.framework: {"samples": samples[w.framework], "number": plan[w.framework][0],
                          "median": statistics.median(samples[w.framework]),
                          "min": min(samples[w.framework]), "max": max(samples[w.framework]),
                          "value": first[w.framework]["value"],
                          "first_call": first[w.framework]["seconds"]} for w in workers}


def run_shape(name: str, spec: Dict[str, Any], threads: Sequence[int], ops: Sequence[str],
              repeat: int, budget: float, log: Callable[[str], None], min_repeat: int = 1) -> Dict[str, Any]:
    """Runs every op and thread count of one shape in a fresh pair of workers."""
    workers = [Worker("pydepth"), Worker("torch")]
    rows: List[Dict[str, Any]] = []
    rss: Dict[str, Any] = {}
    error = None
    try:
        info = {w.framework: w.call(cmd="load", spec=spec) for w in workers}
        if info["pydepth"]["parameters"] != info["torch"]["parameters"]:
            raise WorkerError(f"parameter counts differ: {info}")
        for n in threads:
            for w in workers:
                w.call(cmd="threads", n=n)
            for op in ops:
                t0 = time.perf_counter()
                res = measure_interleaved(workers, op, repeat, budget, min_repeat)
                rows.append({"shape": name, "threads": n, "op": op, **res})
                log(f"  {name:7s} t={n} {op:10s} pydepth {fmt_s(res['pydepth']['median'])} "
                    f"torch {fmt_s(res['torch']['median'])} ratio "
                    f"{res['torch']['median'] / res['pydepth']['median']:.2f} "
                    f"({time.perf_counter() - t0:.0f}s)")
        rss = {w.framework: w.call(cmd="rss") for w in workers}
    except WorkerError as exc:  # record and go on with the next shape
        error = str(exc)
        log(f"  {name}: {error}")
    finally:
        for w in workers:
            w.close()
    return {"shape": name, "spec": spec, "parameters": parameter_count(spec), "rss": rss, "rows": rows,
            "error": error}


def parameter_count(spec: Dict[str, Any]) -> int:
    """Stored scalars of a shape: V*W + L*(2W + 2W^2 + 2W*kv*D + 3WF) + W."""
    w, f = spec["W"], spec["F"]
    kvd = (spec["kv"] or spec["H"]) * (w // spec["H"])
    return spec["V"] * w + spec["L"] * (2 * w + 2 * w * w + 2 * w * kvd + 3 * w * f) + w


def step_flops(spec: Dict[str, Any]) -> float:
    """Useful flops (2 per multiply-add) of one fwd_bwd step's products: the block and head
    matmuls, and causal attention's two products over the T(T+1)/2 allowed (query, key)
    pairs; the backward runs two products per forward one."""
    b = len(spec["tokens"]) if "tokens" in spec else 1
    n, w, f, h, t = b * spec["T"], spec["W"], spec["F"], spec["H"], spec["T"]
    d = w // h
    kvd = (spec["kv"] or h) * d
    block = n * w * (w + 2 * kvd) + n * w * w + n * w * 2 * f + n * f * w
    attention = b * h * 2 * (t * (t + 1) // 2) * d
    forward = spec["L"] * (block + attention) + n * w * spec["V"]
    return 2.0 * 3 * forward


def run_series(kind: str, values: Sequence[int], threads: int, repeat: int, budget: float,
               log: Callable[[str], None]) -> List[Dict[str, Any]]:
    """fwd_bwd over a depth series (tiny width) or a length series (medium width)."""
    workers = [Worker("pydepth"), Worker("torch")]
    out = []
    try:
        for w in workers:
            w.call(cmd="threads", n=threads)
        for v in values:
            spec = dict(SHAPES["tiny"], L=v) if kind == "depth" else dict(SHAPES["medium"], T=v, P=v)
            for w in workers:
                w.call(cmd="load", spec=spec)
            res = measure_interleaved(workers, "fwd_bwd", repeat, budget, loop_target=SERIES_LOOP_TARGET)
            out.append({"series": kind, "value": v, "threads": threads, **res})
            log(f"  {kind}={v:5d} pydepth {fmt_s(res['pydepth']['median'])} torch {fmt_s(res['torch']['median'])}")
    except WorkerError as exc:
        log(f"  {kind} series stopped: {exc}")
    finally:
        for w in workers:
            w.close()
    return out


# ----------------------------------------------------------------------------- checks and report

def fmt_s(s: float) -> str:
    """Seconds in a readable unit."""
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def fmt_range(r: Dict[str, Any]) -> str:
    """'median (min–max, n)' of one result cell."""
    return f"{fmt_s(r['median'])} ({fmt_s(r['min'])}–{fmt_s(r['max'])}, n={len(r['samples'])})"


def correctness_check() -> List[Dict[str, Any]]:
    """torch vs pydepth loss and gradients on the tiny and small shapes (and GQA, and one
    medium block), run in a subprocess so that this parent stays small: a worker's
    ru_maxrss starts from its parent's peak RSS at fork, so the parent must never import
    torch or pydepth itself."""
    try:
        proc = subprocess.run([sys.executable, os.path.join(HERE, "torch_decoder.py"), "--json"],
                              capture_output=True, text=True, timeout=Worker.timeout)
    except subprocess.TimeoutExpired:
        return [{"shape": "all", "loss_rel": math.nan, "grad_rel": math.nan, "init_bit_exact": False,
                 "ok": False, "error": f"timed out after {Worker.timeout:.0f} s"}]
    if not proc.stdout.strip():
        raise RuntimeError(f"torch_decoder.py check failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> Tuple[float, float, float, float]:
    """Least squares y = a + b x; returns (a, b, worst relative residual, R²)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    worst = max(abs(a + b * x - y) / y for x, y in zip(xs, ys))
    ss_res = sum((a + b * x - y) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return a, b, worst, 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0


def cpu_kind() -> str:
    """'intel', 'amd_zen' or 'other': the key of VENDOR_TARGETS for this CPU (/proc/cpuinfo, else lscpu)."""
    fields: Dict[str, str] = {}
    for source in ("/proc/cpuinfo", "lscpu"):
        try:
            if source == "lscpu":
                text = subprocess.run([source], capture_output=True, text=True).stdout
            else:
                with open(source) as f:
                    text = f.read()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip().lower().replace("_", " "), value.strip())
        if "vendor id" in fields:
            break
    vendor = fields.get("vendor id", platform.processor())
    if "Intel" in vendor:
        return "intel"
    family = fields.get("cpu family", "0")
    if "AMD" in vendor and family.isdigit() and int(family) >= ZEN_FIRST_FAMILY:
        return "amd_zen"
    return "other"


def machine_info() -> Dict[str, Any]:
    """nproc, CPU model and architecture, AVX-512, load, environment knobs and versions."""
    info: Dict[str, Any] = {"nproc": os.cpu_count(), "python": platform.python_version(),
                            "arch": platform.machine()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                info["cpu"] = line.split(":", 1)[1].strip()
            if line.startswith("Flags:"):
                flags = line.split(":", 1)[1].split()
                info["avx512"] = sorted(f for f in flags if f.startswith("avx512")) or "none"
                info["avx2_fma"] = "avx2" in flags and "fma" in flags
    except OSError:
        pass
    try:
        info["commit"] = subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%h"],
                                        capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "csrc", "pydepth",
                                "CMakeLists.txt", "pyproject.toml"], capture_output=True, text=True).stdout
        if dirty.strip():  # the installed build may contain uncommitted core changes
            info["commit"] += "+uncommitted(" + ",".join(line[3:] for line in dirty.splitlines()) + ")"
    except OSError:
        pass
    info["cpu_kind"] = cpu_kind()
    info["openblas_env"] = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    info["loadavg_start"] = os.getloadavg()
    return info


def report(results: Dict[str, Any]) -> str:
    """The markdown report of a run."""
    lines: List[str] = []
    m = results["machine"]
    lines.append(f"pydepth commit `{m.get('commit')}` ({results.get('pydepth_file')}, "
                 f"kernel path {results.get('kernel_path', '?')}), "
                 f"torch {results.get('torch')}, parent peak RSS {_rss_mb():.0f} MiB, "
                 f"{m.get('cpu')} ({m.get('arch')}) × {m['nproc']}, AVX-512: {m.get('avx512')}, "
                 f"load avg start {m['loadavg_start'][0]:.2f} / end {m.get('loadavg_end', [0])[0]:.2f}, "
                 f"OPENBLAS env {m['openblas_env']}, wall {results.get('wall_seconds', 0):.0f} s")
    lines.append("")
    lines.append(GC_NOTE)
    lines.append("")
    if results.get("check"):
        lines.append("Correctness (torch twin vs pydepth, relative): "
                     + "; ".join(f"{c['shape']} loss {c['loss_rel']:.1e} grad {c['grad_rel']:.1e}"
                                 f"{'' if c['ok'] else ' FAIL ' + c.get('error', '')}"
                                 for c in results["check"]))
        lines.append("")
    lines.append("| shape | threads | step | pydepth median (min–max, n) | torch median (min–max, n) | torch/pydepth |")
    lines.append("|---|---|---|---|---|---|")
    for sh in results["shapes"]:
        for r in sh["rows"]:
            ratio = r["torch"]["median"] / r["pydepth"]["median"]
            lines.append(f"| {r['shape']} | {r['threads']} | {r['op']} | {fmt_range(r['pydepth'])} | "
                         f"{fmt_range(r['torch'])} | {ratio:.2f}× |")
    lines.append("")
    for sh in results["shapes"]:
        if sh.get("error"):
            lines.append(f"\n**{sh['shape']}: stopped — {sh['error']}**")
    lines.append("")
    lines.append("| shape | config (V, W, H/kv, F, L, T) | parameters | loss pydepth / torch | "
                 "peak RSS pydepth | peak RSS torch | RSS after import pd / torch |")
    lines.append("|---|---|---|---|---|---|---|")
    for sh in results["shapes"]:
        s = sh["spec"]
        fb = [r for r in sh["rows"] if r["op"] != "construct"]
        lp = f"{fb[0]['pydepth']['value']:.12f} / {fb[0]['torch']['value']:.12f}" if fb else "–"
        kv = s["kv"] if s["kv"] else s["H"]
        lines.append(f"| {sh['shape']} | {s['V']}, {s['W']}, {s['H']}/{kv}, {s['F']}, {s['L']}, {s['T']} | "
                     f"{sh['parameters']:,} | {lp} | " + (
                         f"{sh['rss']['pydepth']['peak_mb']:.0f} MiB | {sh['rss']['torch']['peak_mb']:.0f} MiB | "
                         f"{sh['rss']['pydepth']['import_mb']:.0f} / {sh['rss']['torch']['import_mb']:.0f} MiB |"
                         if sh["rss"] else "– | – | – |"))
    for kind, label in (("depth", "depth"), ("length", "T")):
        rows = [r for r in results.get("series", []) if r["series"] == kind]
        if not rows:
            continue
        lines.append("")
        lines.append(f"Scaling in {label} (fwd_bwd, threads={rows[0]['threads']}"
                     + (", tiny width: V=266 W=4 H=1 F=4 T=4)" if kind == "depth"
                        else ", medium width: V=4096 W=128 H=4 F=384 L=4, max_positions=T)"))
        lines.append("")
        lines.append(f"| {label} | pydepth median (min–max, n) | pydepth / {label} | pydepth Δtime/Δ{label} | "
                     f"× previous | torch median | torch / {label} | torch/pydepth |")
        lines.append("|---|---|---|---|---|---|---|---|")
        prev = None
        for r in rows:
            p, t = r["pydepth"]["median"], r["torch"]["median"]
            grow = f"{p / prev[1]:.2f}" if prev else "–"
            slope = fmt_s((p - prev[1]) / (r["value"] - prev[0])) if prev else "–"
            prev = (r["value"], p)
            lines.append(f"| {r['value']} | {fmt_range(r['pydepth'])} | {fmt_s(p / r['value'])} | {slope} | "
                         f"{grow} | {fmt_s(t)} | {fmt_s(t / r['value'])} | {t / p:.2f}× |")
        for fw in ("pydepth", "torch"):
            xs = [r["value"] for r in rows]
            if len(xs) >= 3 and kind == "depth":
                for stat in ("min", "median"):
                    a, b, worst, r2 = linear_fit(xs, [r[fw][stat] for r in rows])
                    lines.append(f"\n{fw} ({stat}s): least-squares fit time = {fmt_s(a)} + {fmt_s(b)} × depth, "
                                 f"R² = {r2:.4f}, worst relative residual {worst * 100:.1f}%")
    for sh in results["shapes"]:
        if sh["shape"] != "issue3":
            continue
        for r in sh["rows"]:
            if r["op"] == "fwd_bwd":
                lines.append("")
                lines.append(f"Issue-3 record, threads={r['threads']}: one forward+backward of the narrow 8-block "
                             f"fixture (seed 4701, tokens [0,99,100,101]) takes {fmt_s(r['pydepth']['median'])} "
                             f"(median; min {fmt_s(r['pydepth']['min'])}; the very first call after "
                             f"construction {fmt_s(r['pydepth']['first_call'])}), torch eager "
                             f"{fmt_s(r['torch']['median'])}.")
    lines += peak_lines(results)
    lines.append("")
    kind = results["machine"].get("cpu_kind", "other")
    lines.append(f"Targets for this CPU ({kind}: {KIND_NOTES[kind]}; fwd_bwd medians):")
    lines.append("")
    for v in targets_status(results):
        lines.append(f"- {v}")
    return "\n".join(lines)


def _line_text(peak: Optional[Dict[str, Any]]) -> str:
    """'avx512 135.2 GFLOP/s at 1 thread, 262.0 ...' of one machine_peak() result, or why it is missing."""
    if not peak or "error" in peak:
        return f"not measured ({peak['error']})" if peak else "not measured"
    return f"{peak['isa']} " + ", ".join(f"{g:.1f} GFLOP/s at {n} thread{'s' if int(n) > 1 else ''}"
                                        for n, g in peak["gflops"].items())


def _line_at(peak: Dict[str, Any], n: int) -> Optional[float]:
    """The line at n threads (JSON round trips turn the keys into strings)."""
    g = (peak.get("gflops") or {})
    return g.get(n) or g.get(str(n))


def peak_lines(results: Dict[str, Any]) -> List[str]:
    """The machine line (before and after the shapes, the higher used) and each shape's share of it."""
    peak = results.get("peak")
    if not peak:
        return []
    lines = [""]
    if "error" in peak:
        return [*lines, f"Machine peak: not measured ({peak['error']})."]
    by = ", ".join(f"{i} {g:.1f}" for i, g in peak["by_isa"].items() if g)
    lines.append(f"Machine line (benchmarks/bench_peak.py's machine_peak(): vector mul + add pairs, no FMA, "
                 f"fastest ~1 ms window per thread, best of {PEAK_ROUNDS} rounds): before the shapes "
                 f"{_line_text(results.get('peak_before'))}; after them {_line_text(results.get('peak_after'))}"
                 f". The shares below use the higher: {by} GFLOP/s at 1 thread; pydepth's kernels run "
                 f"the widest, {_line_text(peak)}.")
    lines.append("")
    lines.append("| shape | threads | useful GFLOP per fwd_bwd | pydepth GFLOP/s | of peak | torch GFLOP/s | of peak |")
    lines.append("|---|---|---|---|---|---|---|")
    for sh in results["shapes"]:
        fl = step_flops(sh["spec"])
        for r in sh["rows"]:
            if r["op"] != "fwd_bwd":
                continue
            pk = _line_at(peak, r["threads"])
            gp, gt = fl / r["pydepth"]["median"] * 1e-9, fl / r["torch"]["median"] * 1e-9
            lines.append(f"| {r['shape']} | {r['threads']} | {fl * 1e-9:.4f} | {gp:.1f} | "
                         f"{100 * gp / pk:.0f}% | {gt:.1f} | {100 * gt / pk:.0f}% |" if pk else
                         f"| {r['shape']} | {r['threads']} | {fl * 1e-9:.4f} | {gp:.1f} | – | {gt:.1f} | – |")
    return lines


def _share(spec: Dict[str, Any], row: Dict[str, Any], peak: Dict[str, Any]) -> str:
    """' (pydepth at 63% of the 2-thread line)', or '' when the line was not measured."""
    pk = _line_at(peak, row["threads"])
    if not pk:
        return ""
    frac = step_flops(spec) / row["pydepth"]["median"] * 1e-9 / pk
    return f" (pydepth at {frac:.{0 if frac >= 0.1 else 2}%} of the {row['threads']}-thread line)"


def _shape_targets(sh: Dict[str, Any], peak: Dict[str, Any], kind: str) -> List[str]:
    """The torch-ratio and share-of-line verdicts of one shape's fwd_bwd rows."""
    out = []
    name = sh["shape"]
    goals = {**TARGETS, **VENDOR_TARGETS[kind]}
    for n, r in sorted((r["threads"], r) for r in sh["rows"] if r["op"] == "fwd_bwd"):
        ratio = r["torch"]["median"] / r["pydepth"]["median"]
        goal = goals.get(name)
        if goal is not None:
            verdict = "holds" if ratio >= goal else f"MISSED (needs {goal / ratio:.2f}× faster pydepth)"
            out.append(f"{name} threads={n}: torch/pydepth ≥ {goal:g}×, got {ratio:.2f}× — {verdict}"
                       + _share(sh["spec"], r, peak))
        pk = _line_at(peak, n)
        if n == 1 and pk and name in PEAK_FRACTIONS:
            goal = PEAK_FRACTIONS[name]
            frac = step_flops(sh["spec"]) / r["pydepth"]["median"] * 1e-9 / pk
            out.append(f"{name} threads=1: ≥ {goal:.0%} of the mul+add line, got {frac:.0%} — "
                       + ("holds" if frac >= goal else f"MISSED (needs {goal / frac:.2f}×)"))
    return out


def _speedup_and_rss(sh: Dict[str, Any], peak: Dict[str, Any]) -> List[str]:
    """The 2-thread speed-up and the laptop RSS verdicts of one shape."""
    out = []
    name = sh["shape"]
    fb = {r["threads"]: r for r in sh["rows"] if r["op"] == "fwd_bwd"}
    if 1 in fb and 2 in fb:
        speedup = fb[1]["pydepth"]["median"] / fb[2]["pydepth"]["median"]
        goal = SPEEDUP_2T.get(name, 1.0)  # everywhere: two threads never slower than one
        if speedup >= goal:
            verdict = "holds"
        elif goal == 1.0 and fb[2]["pydepth"]["min"] <= fb[1]["pydepth"]["max"]:
            # below every grain both counts run the same serial code: equal up to the run's noise
            verdict = "not measurably slower (the min–max ranges overlap)"
        else:
            verdict = f"MISSED (by {goal / speedup:.2f}×)"
        out.append(f"{name}: 2 threads / 1 thread speed-up ≥ {goal:g}, got {speedup:.2f} — {verdict}"
                   + _share(sh["spec"], fb[2], peak))
    if name == "laptop" and sh.get("rss"):
        pd_mb, t_mb = sh["rss"]["pydepth"]["peak_mb"], sh["rss"]["torch"]["peak_mb"]
        out.append(f"laptop peak RSS ≤ {RSS_FRACTION:g}× torch's: {pd_mb:.0f} vs {t_mb:.0f} MiB "
                   f"({pd_mb / t_mb:.2f}×) — " + ("holds" if pd_mb <= RSS_FRACTION * t_mb else
                                                 f"MISSED (by {pd_mb - RSS_FRACTION * t_mb:.0f} MiB)"))
    return out


def targets_status(results: Dict[str, Any]) -> List[str]:
    """One line per target that applies to this CPU (fwd_bwd medians): holds or missed, and by how much."""
    peak = results.get("peak") or {}
    kind = results["machine"].get("cpu_kind", "other")
    out = []
    for sh in results["shapes"]:
        if sh.get("error") and not any(r["op"] == "fwd_bwd" for r in sh["rows"]):
            out.append(f"{sh['shape']}: not measured ({sh['error']})")
        out += _shape_targets(sh, peak, kind) + _speedup_and_rss(sh, peak)
    depth = [r for r in results.get("series", []) if r["series"] == "depth"]
    if len(depth) >= 3:
        # judged on the per-depth minimum, the least noise-sensitive statistic on a shared machine
        a, b, worst, r2 = linear_fit([r["value"] for r in depth], [r["pydepth"]["min"] for r in depth])
        out.append(f"linear in depth (pydepth, fit of the per-depth minima): {fmt_s(a)} + {fmt_s(b)}·L, "
                   f"R² = {r2:.4f}, worst relative residual {worst * 100:.1f}% — "
                   + ("holds (R² ≥ 0.97)" if r2 >= 0.97 else "MISSED (R² below 0.97)"))
    return out


def measure_line(threads: Sequence[int], when: str, log: Callable[[str], None]) -> Dict[str, Any]:
    """The machine line from bench_peak.machine_peak(), or {'error': ...} when it cannot be built."""
    sys.path.insert(0, HERE)
    from bench_peak import PeakError, machine_peak
    log(f"machine line {when}")
    try:
        peak: Dict[str, Any] = machine_peak(threads, rounds=PEAK_ROUNDS)
    except PeakError as exc:
        return {"error": str(exc)}
    log(f"machine line {when} (mul + add, no FMA): {_line_text(peak)}")
    return peak


def best_line(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """The higher of the two lines (a load spell only ever lowers a measurement), or the one measured."""
    from bench_peak import higher_line
    if "error" in before or "error" in after:
        return after if "error" in before else before
    return higher_line(before, after)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=None, help="comma list of " + ",".join(SHAPES))
    ap.add_argument("--threads", default="1,2", help="comma list of thread counts")
    ap.add_argument("--repeat", type=int, default=None, help="repetitions per cell (default 9, quick 3)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions; skip laptop; short series")
    ap.add_argument("--no-scaling", action="store_true", help="skip the depth and length series")
    ap.add_argument("--no-check", action="store_true", help="skip the torch/pydepth agreement check")
    ap.add_argument("--cell-budget", type=float, default=None,
                    help="seconds one framework may spend on one cell before repeats are cut "
                         "(default 20, quick 5)")
    ap.add_argument("--ops", default=None, help="comma list of " + ",".join(OPS) + " (default: all; "
                    "laptop skips fwd_record, which costs the same as fwd_nograd)")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds one worker command may take before the shape is abandoned")
    ap.add_argument("--commit-label", default=None,
                    help="commit the installed pydepth was built from, when it is not the working tree "
                         "of the checkout this script is in (e.g. built from `git archive HEAD`)")
    ap.add_argument("--keep", choices=["training", "all"], default="training",
                    help="what pydepth's fwd_bwd forward keeps (default: training, only what a "
                         "training step reads)")
    ap.add_argument("--cpu-kind", choices=sorted(VENDOR_TARGETS), default=None,
                    help="judge by another CPU's targets (default: this CPU's, from /proc/cpuinfo or lscpu)")
    ap.add_argument("--json", default=None, help="write all samples and metadata here")
    ap.add_argument("--worker", choices=["pydepth", "torch"], help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the benchmark and prints the markdown report."""
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    start = time.perf_counter()
    Worker.timeout = args.timeout
    repeat = args.repeat or (3 if args.quick else 9)
    budget = args.cell_budget or (5.0 if args.quick else 20.0)
    shapes = args.shapes.split(",") if args.shapes else [s for s in DEFAULT_SHAPES
                                                         if not (args.quick and s == "laptop")]
    threads = [int(t) for t in args.threads.split(",")]
    ops = args.ops.split(",") if args.ops else OPS
    for s in shapes:
        if s not in SHAPES:
            raise SystemExit(f"unknown shape {s!r}; choose from {', '.join(SHAPES)}")
    for spec in SHAPES.values():
        spec["keep"] = args.keep

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results: Dict[str, Any] = {"machine": machine_info(), "args": vars(args), "shapes": [], "series": []}
    if args.commit_label:
        results["machine"]["commit"] = args.commit_label
    if args.cpu_kind:
        results["machine"]["cpu_kind"] = args.cpu_kind
    for fw in ("pydepth", "torch"):  # versions, from a throwaway worker (the parent stays small)
        w = Worker(fw)
        info = w.call(cmd="info")
        w.close()
        results[fw] = info["version"]
        results[fw + "_file"] = info["file"]
        if "kernel_path" in info:
            results["kernel_path"] = info["kernel_path"]
            log(f"pydepth kernel path: {info['kernel_path']}")
    results["peak_before"] = measure_line(threads, "before the shapes", log)
    if not args.no_check:
        log("correctness check")
        results["check"] = correctness_check()
        if not all(c["ok"] for c in results["check"]):
            log("correctness check FAILED: " + json.dumps(results["check"]))
    for s in shapes:
        log(f"shape {s}")
        if s == "laptop":  # few but fixed repeats: min(repeat, 3) samples per cell
            r = min(repeat, LAPTOP_MAX_REPEAT)
            results["shapes"].append(run_shape(s, SHAPES[s], threads, ops if args.ops else LAPTOP_OPS,
                                               r, budget, log, min_repeat=r))
        else:
            results["shapes"].append(run_shape(s, SHAPES[s], threads, ops, repeat, budget, log))
    if not args.no_scaling:
        depths = DEPTHS if not args.quick else [1, 4, 16, 64]
        lengths = LENGTHS if not args.quick else [16, 64, 256]
        log("depth series")
        results["series"] += run_series("depth", depths, threads[0], repeat, budget, log)
        log("length series")
        results["series"] += run_series("length", lengths, threads[0], min(repeat, 5), budget, log)
    results["peak_after"] = measure_line(threads, "after the shapes", log)
    results["peak"] = best_line(results["peak_before"], results["peak_after"])
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["wall_seconds"] = time.perf_counter() - start
    text = report(results)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
