# SPDX-License-Identifier: MIT
"""This CPU's peak rate of separately rounded multiply-adds (the machine line of the benchmark).

    python benchmarks/bench_peak.py [--threads 1,2] [--seconds 0.3] [--rounds 5]

pydepth's matmul kernels run c += a*b as a multiply and an add (no FMA: the bits must match
the reference's two roundings), so their ceiling is the CPU's rate of vector mul + add pairs,
not its FMA rate. peak_muladd.c measures it with 12 independent accumulators per vector width
(the register tile of the kernels), compiled here with the system C compiler; each thread
reports its fastest ~1 ms window, so the number is what an undisturbed core delivers even on a
shared machine. Each cell is measured in `--rounds` separate runs and the best is kept, since one
run can land wholly in a busy spell of the host. GFLOP/s count the multiply and the add as one
flop each, like 2*M*N*K. bench_decoder.py measures its line with the same machine_peak().
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "peak_muladd.c")
# widest first, as pydepth's kernel dispatch chooses; peak_muladd builds only its machine's
ISAS = ["avx512", "avx2", "sse2"] if platform.machine().lower() in ("x86_64", "amd64") else ["neon"]


class PeakError(RuntimeError):
    """The micro-benchmark could not be built or run on this machine."""


def build(outdir: str) -> str:
    """Compiles peak_muladd.c (contraction off, like the core) and returns the executable."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise PeakError("no C compiler (cc/gcc) on PATH")
    exe = os.path.join(outdir, "peak_muladd")
    res = subprocess.run([cc, "-O2", "-ffp-contract=off", "-pthread", "-o", exe, SOURCE],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise PeakError(f"{cc} failed: {res.stderr.strip()[:500]}")
    return exe


def run(exe: str, isa: str, threads: int, seconds: float) -> Optional[float]:
    """GFLOP/s of isa on `threads` threads, or None when this CPU lacks the ISA."""
    res = subprocess.run([exe, isa, str(threads), str(seconds)], capture_output=True, text=True)
    if res.returncode == 2 and "unsupported" in res.stderr:
        return None
    if res.returncode != 0:
        raise PeakError(f"peak_muladd {isa} {threads} failed: {res.stderr.strip()}")
    return float(res.stdout.split()[2])


def _peak_once(exe: str, threads: Sequence[int], seconds: float) -> Dict[str, object]:
    """One round: every ISA at 1 thread, then the widest at each thread count."""
    by_isa = {isa: run(exe, isa, 1, seconds) for isa in ISAS}
    isa = next(i for i in ISAS if by_isa[i] is not None)
    gflops = {int(n): (by_isa[isa] if n == 1 else run(exe, isa, int(n), seconds)) for n in threads}
    return {"isa": isa, "gflops": gflops, "by_isa": by_isa}


def machine_peak(threads: Sequence[int], seconds: float = 0.3, rounds: int = 5) -> Dict[str, object]:
    """{'isa': widest ISA, 'gflops': {threads: GFLOP/s}, 'by_isa': {isa: 1-thread GFLOP/s}, 'rounds'},
    each cell the best of `rounds` separate runs (the one line both benchmarks quote)."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp)
        runs = [_peak_once(exe, threads, seconds) for _ in range(max(1, rounds))]
    by_isa = {isa: max((r["by_isa"][isa] for r in runs if r["by_isa"][isa] is not None), default=None)
              for isa in ISAS}
    gflops = {n: max(r["gflops"][n] for r in runs) for n in runs[0]["gflops"]}
    return {"isa": runs[0]["isa"], "gflops": gflops, "by_isa": by_isa, "rounds": len(runs)}


def higher_line(a: Dict[str, object], b: Dict[str, object]) -> Dict[str, object]:
    """The cell-wise higher of two machine_peak() results (the line quoted beside a benchmark)."""
    by_isa = {i: max((g for g in (a["by_isa"].get(i), b["by_isa"].get(i)) if g), default=None)
              for i in a["by_isa"]}
    gflops = {n: max(a["gflops"][n], b["gflops"][n]) for n in a["gflops"]}
    return {"isa": a["isa"], "gflops": gflops, "by_isa": by_isa, "rounds": a["rounds"] + b["rounds"]}


def main(argv: Optional[List[str]] = None) -> int:
    """Prints the peak line for each ISA and thread count."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=0.3, help="measuring time per cell and round")
    ap.add_argument("--rounds", type=int, default=5, help="separate runs per cell; the best is kept")
    args = ap.parse_args(argv)
    try:
        peak = machine_peak([int(t) for t in args.threads.split(",")], args.seconds, args.rounds)
    except PeakError as exc:
        print(f"bench_peak: {exc}", file=sys.stderr)
        return 1
    for isa, g in peak["by_isa"].items():
        print(f"{isa:7s} 1 thread: " + (f"{g:.1f} GFLOP/s (mul + add, no FMA)" if g else "not on this CPU"))
    for n, g in peak["gflops"].items():
        print(f"{peak['isa']} {n} thread{'s' if n > 1 else ''}: {g:.1f} GFLOP/s")
    print(f"(best of {peak['rounds']} rounds of {args.seconds:g} s per cell)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
