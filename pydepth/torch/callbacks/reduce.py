# SPDX-License-Identifier: MIT
"""Which processes' micro-batches an in-step observation covers: this process's alone, or every
process's, whose sums of squares and counts are all-reduced so that each RMS is that of the union
of their valid positions (numerics.md §9 per process; the processes' sums are added by the
collective: in rank order for two processes)."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ...errors import MonitorSettingError, NonFiniteValueError, PydepthError
from ...health import DepthHealthReport, SquareSums, sequential_sum, square_sums
from ..health import SiteProbe, _host, branch_arrays, report_from_values

__all__ = ["LOCAL", "ALL_REDUCE", "PROCESSES", "check_processes", "require_group", "allreduced_report",
           "share_failure"]

LOCAL = "local"
ALL_REDUCE = "all-reduce"

#: What each setting of ``processes=`` observes (the docs' wording; the record's value is the key).
PROCESSES: Dict[str, str] = {
    LOCAL: "this process's micro-batch; no collective runs",
    ALL_REDUCE: "every process's micro-batch: per-site sums of squares and counts all-reduced over the default group",
}

_DBL_MAX = float(np.finfo(np.float64).max)


def check_processes(processes: Any) -> str:
    """``processes`` if it is a key of :data:`PROCESSES`, else :class:`pydepth.MonitorSettingError`."""
    if not isinstance(processes, str) or processes not in PROCESSES:
        raise MonitorSettingError(f"processes must be one of {sorted(PROCESSES)}, got {processes!r}")
    return processes


def require_group() -> None:
    """Refuses an all-reduced observation without an initialized default process group."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        raise MonitorSettingError("processes='all-reduce' needs an initialized torch.distributed default group "
                                  "(torch.distributed.init_process_group) when the observation runs")


def _all_reduce(values: Sequence[float], op: Any) -> List[float]:
    import torch.distributed as dist
    t = torch.tensor(list(values), dtype=torch.float64)
    dist.all_reduce(t, op=op)
    return [float(v) for v in t.tolist()]


def share_failure(error: Optional[PydepthError], count: int) -> None:
    """Every process's first collective: when any process failed before its sums (``error``), all
    raise — the failing one its own error, the others a :class:`pydepth.MonitorSettingError` —
    instead of leaving the others waiting in the next collective. ``count`` is the number of
    arrays, checked to agree across processes."""
    import torch.distributed as dist
    flags = _all_reduce([1.0 if error is not None else 0.0, float(count), -float(count)], dist.ReduceOp.SUM)
    world = dist.get_world_size()
    if error is not None:
        raise error
    if flags[0] > 0:
        raise MonitorSettingError(f"{int(flags[0])} other process(es) could not make their in-step observation; "
                                  "the all-reduced one is abandoned on every process (see their error)")
    if flags[1] != world * count:
        raise MonitorSettingError(f"the processes observe different numbers of arrays ({flags[1] / world:g} on "
                                  f"average, {count} here): their models differ")


def allreduced_report(probe: SiteProbe, band: Any = None) -> DepthHealthReport:
    """The report of every process's micro-batch: one all-reduce of each array's sum of squares
    and count (and of the positions); arrays out of range on any process are rescaled by the
    largest magnitude of all processes (two more collectives), and a non-finite value anywhere is
    refused on every process. Every process must call it for the same step."""
    import torch.distributed as dist
    branches, branch_names = branch_arrays(probe)
    sites = [_host(s) for s in probe.sites]
    n = len(sites)
    parts: List[SquareSums] = []
    error: Optional[PydepthError] = None
    try:
        parts.append(square_sums(sites + branches, probe.valid, what=[f"site {i}" for i in range(n)] + branch_names))
        parts.append(square_sums([_host(g) for g in probe.adjoints], probe.valid,
                                 what=[f"adjoint of site {i}" for i in range(n)], scale=probe.adjoint_scale))
    except PydepthError as err:
        error = err
    share_failure(error, 2 * n + len(branches))
    index = [(p, i) for p in parts for i in range(len(p.sums))]
    local = [p.sums[i] for p, i in index]
    totals = _all_reduce([0.0 if s is None else s for s in local] + [float(p.counts[i]) for p, i in index]
                         + [1.0 if s is None else 0.0 for s in local] + [float(parts[0].mask.sum())],
                         dist.ReduceOp.SUM)
    k = len(index)
    sums, counts, out_of_range = totals[:k], totals[k:2 * k], totals[2 * k:3 * k]
    rescale = [j for j in range(k) if out_of_range[j] > 0 or not (sums[j] <= _DBL_MAX / max(counts[j], 1.0) / 4.0)]
    result = [math.sqrt(sums[j] / counts[j]) if counts[j] > 0 else 0.0 for j in range(k)]
    if rescale:
        _rescaled(index, rescale, counts, result)
    acts, branch_rms, adjoints = result[:n], result[n:n + len(branches)], result[n + len(branches):]
    return report_from_values(probe, acts, adjoints, branch_rms, int(totals[-1]), band)


def _rescaled(index: List[Tuple[SquareSums, int]], which: List[int], counts: List[float],
              result: List[float]) -> None:
    """Divides by the largest magnitude over all processes before squaring (numerics.md §9)."""
    import torch.distributed as dist
    rows = {j: index[j][0].scaled(index[j][1])[index[j][0].mask.reshape(-1)].reshape(-1) for j in which}
    largest = [float(np.abs(rows[j]).max()) if rows[j].size else 0.0 for j in which]
    largest = [v if math.isfinite(v) else math.inf for v in largest]  # NaN: refused like infinity
    peaks = _all_reduce(largest, dist.ReduceOp.MAX)
    for j, peak, mine in zip(which, peaks, largest):
        if not math.isfinite(peak):
            name = index[j][0].names[index[j][1]]
            if not math.isfinite(mine):
                bad = rows[j][~np.isfinite(rows[j])][0]
                raise NonFiniteValueError(f"{name} holds non-finite value {float(bad)!r} on this process")
            raise NonFiniteValueError(f"{name} holds a non-finite value on another process")
    scaled_sums: List[float] = []
    for j, peak in zip(which, peaks):
        with np.errstate(under="ignore"):  # tiny scaled squares may round to zero harmlessly
            y = rows[j] / peak if peak > 0.0 else rows[j]
            scaled_sums.append(sequential_sum(y * y))
    totals = _all_reduce(scaled_sums, dist.ReduceOp.SUM)
    for j, peak, total in zip(which, peaks, totals):
        result[j] = peak * math.sqrt(total / counts[j]) if peak > 0.0 and counts[j] > 0 else 0.0
