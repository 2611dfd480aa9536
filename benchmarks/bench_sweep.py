# SPDX-License-Identifier: MIT
"""Sweep throughput: cells per second serially, on the local default cluster (worker processes),
on a local cluster of threads, and through a `dask scheduler` + `dask worker` processes on
127.0.0.1, for the tiny shape and a >= 50 ms cell.

    python benchmarks/bench_sweep.py [--workers 2] [--repeat 3] [--tiny-cells 400] [--big-cells 60]

Rates count compute only (first task sent to last Parquet part written; engine start-up is
reported separately). "ms/cell in" is the median wall time of one cell inside the engine (its
``wall_time_s``); "busy" is the summed cell time over (workers x compute time): what the
engine keeps its workers busy with, so a low rate with high busy means the cores were not free.
Every engine's rows are checked bit for bit against the serial run's.
Medians over --repeat runs; ratios are against the serial rate measured in the same run.
The serial baseline runs with the core's default thread count and with one thread.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

import numpy as np

SHAPES = {
    # the benchmarks' tiny shape: V=266, W=4, H=1, F=4, L=8, T=4
    "tiny": dict(depths=[8], widths=[4], sequence_length=4, ff_ratio=1.0, head_width=8, vocabulary_size=266),
    # a cell of >= 50 ms on one idle core of this machine (about 57 ms; 38 ms at depth 32)
    "big": dict(depths=[48], widths=[64], sequence_length=64, ff_ratio=1.0, head_width=8, vocabulary_size=266),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_cluster(workers: int, logdir: str):
    import distributed
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, PYDEPTH_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port",
                               str(port), "--dashboard-address", "127.0.0.1:0"], cwd=logdir, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    for _ in range(workers):
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", "worker", address, "--nthreads", "1",
                                       "--no-nanny", "--host", "127.0.0.1", "--dashboard-address",
                                       "127.0.0.1:0"], cwd=logdir, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    deadline = time.monotonic() + 60
    while True:
        try:
            client = distributed.Client(address, timeout=10)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    client.wait_for_workers(workers, timeout=60)
    client.close()
    return address, procs


def _stop(procs) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def _same(a, b) -> bool:
    for name in a.column_names:
        if name == "wall_time_s":
            continue
        x, y = a.column(name).to_numpy(), b.column(name).to_numpy()
        if x.dtype == np.float64:
            if not np.array_equal(x.view(np.uint64), y.view(np.uint64)):
                return False
        elif x.tolist() != y.tolist():
            return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tiny-cells", type=int, default=400, help="cells of the tiny shape per run")
    ap.add_argument("--big-cells", type=int, default=60, help="cells of the >= 50 ms shape per run")
    args = ap.parse_args()

    import pydepth
    from pydepth.sweep import SweepSpec, read_table, run
    tmp = tempfile.mkdtemp(prefix="bench-sweep-")
    address, procs = _start_cluster(args.workers, tmp)
    default_threads = pydepth.get_num_threads()
    print(f"pydepth {pydepth.__version__}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at start; dask scheduler {address} + {args.workers} workers")
    try:
        for shape, n in (("tiny", args.tiny_cells), ("big", args.big_cells)):
            spec = SweepSpec(seeds=range(n // 2), **SHAPES[shape])
            engines = [("serial", "serial", default_threads), ("serial-1thread", "serial", 1),
                       (f"local-{args.workers}", "local", default_threads),
                       (f"threads-{args.workers}", "threads", default_threads),
                       (f"dask-{args.workers}-workers", address, default_threads)]
            rates: Dict[str, List[float]] = {e[0]: [] for e in engines}
            cell_ms: Dict[str, List[float]] = {e[0]: [] for e in engines}
            busy: Dict[str, List[float]] = {e[0]: [] for e in engines}
            startup: Dict[str, List[float]] = {e[0]: [] for e in engines}
            reference = None
            for r in range(args.repeat):
                for name, scheduler, threads in engines:
                    pydepth.set_num_threads(threads)
                    out = os.path.join(tmp, f"{shape}-{name}-{r}")
                    res = run(spec, out=out, scheduler=scheduler, workers=args.workers, progress=False)
                    pydepth.set_num_threads(default_threads)
                    rates[name].append(res.cells_per_second)
                    startup[name].append(res.seconds - res.compute_seconds)
                    table = read_table(out)
                    walls = dict(zip(table.column("cell_id").to_pylist(), table.column("wall_time_s").to_pylist()))
                    cell_ms[name].append(1e3 * statistics.median(walls.values()))
                    busy[name].append(sum(walls.values()) / (max(1, res.workers) * res.compute_seconds))
                    if reference is None:
                        reference = table
                    elif not _same(reference, table):
                        raise SystemExit(f"{name}: rows differ from the serial run")
            base = statistics.median(rates["serial"])
            ms = 1e3 / statistics.median(rates["serial-1thread"])
            print(f"\n{shape}: {len(spec.cells())} cells ({ms:.1f} ms per cell serially on one thread), "
                  f"median of {args.repeat}")
            one = statistics.median(rates["serial-1thread"])
            print(f"{'engine':<22}{'cells/s':>10}{'vs serial':>11}{'vs 1-thread':>13}{'start-up s':>12}"
                  f"{'ms/cell in':>12}{'busy':>7}   all runs")
            for name, _, _ in engines:
                med = statistics.median(rates[name])
                print(f"{name:<22}{med:>10.1f}{med / base:>10.2f}x{med / one:>12.2f}x"
                      f"{statistics.median(startup[name]):>12.2f}{statistics.median(cell_ms[name]):>12.1f}"
                      f"{100 * statistics.median(busy[name]):>6.0f}%   " + ", ".join(f"{x:.1f}" for x in rates[name]))
    finally:
        _stop(procs)
    print(f"\nload average {os.getloadavg()[0]:.1f} at end; every engine's rows equal the serial run bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
