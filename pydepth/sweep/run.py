# SPDX-License-Identifier: MIT
"""Running a sweep: cells batched into Dask tasks, rows written to Parquet as batches finish.

Engines (``scheduler=``):

- ``None``: the cluster at ``$DASK_SCHEDULER_ADDRESS`` if set, else the local default.
- ``"local"``: the local default, a ``distributed.LocalCluster`` of single-threaded worker
  processes (one per core, or ``workers``) with ``PYDEPTH_NUM_THREADS=1``: the Python part of
  a cell (observation, per-block bookkeeping) never waits on a shared GIL. The measurement on
  the loaded development machine did not separate it from ``"threads"`` (benchmarks/README.md).
- ``"threads"``: a local cluster of one in-process worker with ``workers`` threads.
- ``"serial"``: no Dask; the cells run one after another in this process (the baseline).
- ``"tcp://HOST:PORT"`` (any Dask address): an existing cluster; its workers need this same
  pydepth version, which is checked before any task is sent.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, TextIO, Tuple, Union

from .cell import backend, run_cells
from .errors import SweepDependencyError, SweepError, SweepSpecError
from .progress import Progress
from .spec import Cell, SweepSpec
from .store import claimed, prepare_directory, pyarrow_modules, write_part
from .._version import __version__

__all__ = ["SweepResult", "run", "plan_batches", "estimate_cell_seconds", "max_workers", "result_facts",
           "Engine", "check_engine"]

PathLike = Union[str, "os.PathLike[str]"]

#: Smallest and largest estimated work per Dask task, in seconds.
MIN_TASK_SECONDS = 0.05
MAX_TASK_SECONDS = 2.0
#: Seconds to wait for a remote scheduler and its first worker.
CONNECT_TIMEOUT = 30.0


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did: cells in the grid, cells computed now and cells found done."""

    out: pathlib.Path
    engine: str
    workers: int
    cells_total: int
    cells_run: int
    cells_resumed: int
    batches: int
    seconds: float
    compute_seconds: float

    @property
    def cells_per_second(self) -> float:
        """Cells computed now per second, from the first task sent to the last part written
        (engine start-up excluded; 0 when nothing ran)."""
        t = self.compute_seconds
        return self.cells_run / t if t > 0 and self.cells_run else 0.0

    def _repr_html_(self) -> str:
        """The sweep as a notebook shows it: the verdict read from its store, where each policy
        leaves the band, this run's counts and, with matplotlib, the depth-check figures."""
        from ..report.inline import sweep_store_html
        return sweep_store_html(self.out, result_facts(self))


def result_facts(result: SweepResult) -> List[Tuple[str, Any]]:
    """A sweep result's fields as (name, value) rows for a table."""
    return [("out", str(result.out)), ("engine", result.engine), ("workers", result.workers),
            ("cells in the grid", result.cells_total), ("cells run now", result.cells_run),
            ("cells found done", result.cells_resumed), ("seconds", f"{result.seconds:.3g}")]


def estimate_cell_seconds(spec: SweepSpec, cell: Cell) -> float:
    """A rough cost model of one cell on one core, used only to size batches: per pass a fixed
    cost per block (Python and observation) plus one proportional to parameters x tokens."""
    cfg = spec.config(cell.depth, cell.width)
    per_pass = 3e-4 * cell.depth + 4e-10 * cfg.parameter_count * spec.sequence_length * spec.batch_rows
    return 5e-4 + (spec.max_step + 1) * per_pass


def max_workers() -> int:
    """The most local workers a sweep starts: four per core (at least four)."""
    return 4 * max(1, os.cpu_count() or 1)


def plan_batches(spec: SweepSpec, cells: Sequence[Cell], workers: int) -> List[List[Cell]]:
    """Groups cells into tasks of at least ``MIN_TASK_SECONDS`` of estimated work (at most
    ``MAX_TASK_SECONDS``, aiming at four tasks per worker), most expensive first."""
    if not cells:
        return []
    cost = {c: estimate_cell_seconds(spec, c) for c in cells}
    total = sum(cost.values())
    target = min(MAX_TASK_SECONDS, max(MIN_TASK_SECONDS, total / (4 * max(1, workers))))
    ordered = sorted(cells, key=lambda c: (-cost[c], c.depth, c.width, c.seed, c.policy))
    batches: List[List[Cell]] = []
    current: List[Cell] = []
    acc = 0.0
    for c in ordered:
        current.append(c)
        acc += cost[c]
        if acc >= target:
            batches.append(current)
            current, acc = [], 0.0
    if current:
        batches.append(current)
    return batches


def _dask() -> Any:
    try:
        import distributed
    except ImportError:
        raise SweepDependencyError(
            "sweeps on Dask need dask with distributed, part of the optional 'sweep' extra: "
            "pip install 'pydepth[sweep]'") from None
    return distributed


def _worker_version() -> str:
    return __version__


def _task_args(spec: SweepSpec, batch: Sequence[Cell]) -> Tuple[Dict[str, Any], List[Tuple[int, int, int, str]]]:
    return spec.to_dict(), [(c.depth, c.width, c.seed, c.policy) for c in batch]


Task = Callable[..., Dict[str, List[Any]]]


class _OneLine(logging.Filter):
    """Keeps Dask's client log messages but not their tracebacks: a lost scheduler is reported once,
    as a SweepError, and its reconnection attempts stay one line each."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        if isinstance(record.msg, str) and "Traceback" in record.msg:
            record.msg, record.args = record.msg.split("Traceback", 1)[0].rstrip() or "(traceback omitted)", None
        return True


_ONE_LINE = _OneLine()
_CLIENT_LOGGERS = ("distributed.client", "distributed.core", "distributed.comm")


class Engine:
    """A Dask client (and the local cluster it owns, if any), closed on exit; ``serial`` runs the
    tasks in this process. Every store-writing study (a sweep, a depth-transfer study) runs on it."""

    def __init__(self, scheduler: Optional[str], workers: Optional[int]) -> None:
        self.cluster = None
        self.client = None
        self.name = "serial"
        self.workers = 1
        if scheduler == "serial":
            return
        distributed = _dask()
        for name in _CLIENT_LOGGERS:  # until close(): Dask's own log lines without tracebacks
            logging.getLogger(name).addFilter(_ONE_LINE)
        address = scheduler if scheduler not in (None, "local", "threads") else None
        if scheduler is None:
            address = os.environ.get("DASK_SCHEDULER_ADDRESS") or None
        if address is not None:
            if "://" not in address and ":" not in address:
                raise SweepSpecError(f"scheduler must be 'local', 'threads', 'serial' or a Dask address "
                                     f"such as tcp://127.0.0.1:8786, got {address!r}")
            try:
                self.client = distributed.Client(address, timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as err:
                raise SweepError(f"cannot reach the Dask scheduler at {address}: {err}") from None
            try:
                self.client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
            except TimeoutError:
                self.close()
                raise SweepError(f"the Dask scheduler at {address} has no worker after "
                                 f"{CONNECT_TIMEOUT:.0f} s") from None
            self.name = f"dask scheduler {address}"
        else:
            n = workers or os.cpu_count() or 1
            if scheduler == "threads":
                # HTTP servers on loopback, a free port (None can still try :8787)
                self.cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=n, processes=False,
                                                        dashboard_address="127.0.0.1:0",
                                                        worker_dashboard_address="127.0.0.1:0")
                self.name = f"local Dask cluster, 1 worker x {n} threads"
            else:  # HTTP servers on loopback, a free port (None can still try :8787)
                self.cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                                        host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                                        env={"PYDEPTH_NUM_THREADS": "1"})
                self.name = f"local Dask cluster, {n} worker processes"
            self.client = distributed.Client(self.cluster)
        versions = self.client.run(_worker_version)
        bad = {w: v for w, v in versions.items() if v != __version__}
        if bad:
            self.close()
            raise SweepError(f"Dask workers run another pydepth version than {__version__}: {bad}")
        self.workers = max(1, sum(self.client.nthreads().values()))

    def results(self, task: Task, arguments: Sequence[Tuple[Any, ...]]) -> Iterator[Dict[str, List[Any]]]:
        """``task(*args)`` for each argument tuple, in completion order (in order when serial)."""
        if self.client is None:
            for args in arguments:
                yield task(*args)
            return
        distributed = _dask()
        futures = [self.client.submit(task, *args, pure=False) for args in arguments]
        try:
            for fut in distributed.as_completed(futures):
                yield fut.result()
        except SweepError:
            raise
        except (Exception, asyncio.CancelledError) as err:  # a lost scheduler cancels every future
            raise SweepError(f"a sweep task failed or the Dask scheduler was lost: {type(err).__name__}: {err}; "
                             "the finished parts are kept, rerun the same command to resume") from err
        finally:
            for f in futures:
                f.cancel()

    def close(self) -> None:
        for part in ("client", "cluster"):
            obj = getattr(self, part)
            setattr(self, part, None)
            if obj is not None:  # a scheduler that died has nothing left to close; the sweep's error says so
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    obj.close()
        for name in _CLIENT_LOGGERS:
            logging.getLogger(name).removeFilter(_ONE_LINE)


def run(spec: SweepSpec, *, out: PathLike, scheduler: Optional[str] = None, resume: bool = True,
        workers: Optional[int] = None, progress: bool = True, stream: Optional[TextIO] = None,
        recompute_damaged: bool = False) -> SweepResult:
    """Runs every cell of ``spec`` not yet in ``out`` and writes its rows there as Parquet.

    ``scheduler`` picks the engine (see the module docstring); ``workers`` sizes a local
    cluster. With ``resume`` (the default) cells already stored in ``out`` are skipped; a
    killed sweep loses at most the batches in flight. Every stored part is verified first; a
    damaged one raises DamagedPartError, or with ``recompute_damaged`` is moved to
    ``_damaged/`` and its cells recomputed. Steps after 0 need ``pydepth.optim``
    (:class:`OptimizerUnavailableError` before any work otherwise). Returns a
    :class:`SweepResult`; read the rows with :func:`pydepth.sweep.read_table`."""
    if not isinstance(spec, SweepSpec):
        raise TypeError(f"spec must be a pydepth.sweep.SweepSpec, got {type(spec).__name__}")
    check_engine(scheduler, workers)
    backend(spec).ready(spec)
    with claimed(out):
        return _run(spec, out, scheduler, workers, resume, recompute_damaged, progress, stream)


def check_engine(scheduler: Optional[str], workers: Optional[int]) -> None:
    """Refuses, before any work, a scheduler that is not a string, a worker count out of range,
    and a missing pyarrow (or Dask, unless ``serial``)."""
    if scheduler is not None and not isinstance(scheduler, str):
        raise SweepSpecError(f"scheduler must be a string or None, got {scheduler!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or not 1 <= workers <= max_workers()):
        raise SweepSpecError(f"workers must be an integer in [1, {max_workers()}] (four per core of this "
                             f"machine), got {str(workers)[:40]}")
    pyarrow_modules()
    if scheduler != "serial":
        _dask()


def _run(spec: SweepSpec, out: PathLike, scheduler: Optional[str], workers: Optional[int], resume: bool,
         recompute_damaged: bool, progress: bool, stream: Optional[TextIO]) -> SweepResult:
    t0 = time.perf_counter()
    done = prepare_directory(out, spec, resume=resume, repair=recompute_damaged)
    cells = spec.cells()
    todo = [c for c in cells if c.cell_id not in done]
    bar = Progress(len(cells), skipped=len(cells) - len(todo), stream=stream, enabled=progress)
    if todo:
        bar.note(f"{bar.label}: {len(todo)} cells to compute; starting the {scheduler or 'local'} engine")
    engine = Engine(scheduler, workers) if todo else None
    n_workers = engine.workers if engine else 0
    if engine is not None:
        bar.note(f"{bar.label}: {engine.name} ready with {n_workers} worker(s) after {bar.elapsed:.1f} s")
    batches = plan_batches(spec, todo, n_workers or 1)
    t1 = time.perf_counter()
    bar.t0 = t1  # rates count compute, not the engine's start-up
    try:
        if engine is not None:
            for columns in engine.results(run_cells, [_task_args(spec, b) for b in batches]):
                write_part(out, spec, columns)
                bar.update(len(set(columns["cell_id"])))
        t2 = time.perf_counter()
        bar.close()
    finally:
        if engine is not None:
            engine.close()
    return SweepResult(out=pathlib.Path(out), engine=engine.name if engine else "none (all cells stored)",
                       workers=n_workers, cells_total=len(cells), cells_run=len(todo),
                       cells_resumed=len(cells) - len(todo), batches=len(batches),
                       seconds=time.perf_counter() - t0, compute_seconds=t2 - t1)
