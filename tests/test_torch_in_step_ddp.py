# SPDX-License-Identifier: MIT
"""In-step observation under DistributedDataParallel on two gloo processes: the record says
whether the values are this process's micro-batch (``processes="local"``) or every process's
(``"all-reduce"``), and the values equal the RMS recomputed from each rank's own sums of squares —
its own for local, the two ranks' sums added for all-reduce — bit for bit."""
import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import need_extra

need_extra("torch", "hf")

HERE = pathlib.Path(__file__).resolve().parent


def bits(values):
    return np.array(values, dtype=np.float64).view(np.uint64).tolist()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is missing from this torch build (extra 'torch')")
    out = tmp_path_factory.mktemp("ddp-in-step")
    procs = [subprocess.Popen([sys.executable, "-P", str(HERE / "ddp_in_step_worker.py"), str(r), str(out)], cwd=out,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    try:
        errors = [p.communicate(timeout=300)[1] for p in procs]
    finally:
        for p in procs:  # one rank failing leaves the other waiting in a collective
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], [e[-3000:] for e in errors]
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in (0, 1)]


def test_in_step_local_values_are_each_ranks_own_micro_batch_and_say_so(ranks):
    for rank in ranks:
        got = rank["local"]
        assert got["processes"] == "local" and got["valid_positions"] == got["positions"]
        want = [math.sqrt(s / n) for s, n in got["activation_sums"]]
        assert bits(got["activation_rms"]) == bits(want)
        assert bits(got["adjoint_rms"]) == bits([math.sqrt(s / n) for s, n in got["adjoint_sums"]])
    assert ranks[0]["local"]["activation_rms"] != ranks[1]["local"]["activation_rms"]  # two different batches


def test_in_step_all_reduce_values_are_the_sums_over_both_ranks_batches_and_say_so(ranks):
    first, second = ranks[0]["all-reduce"], ranks[1]["all-reduce"]
    for kind in ("activation", "adjoint"):
        want = [math.sqrt((s0 + s1) / (n0 + n1))
                for (s0, n0), (s1, n1) in zip(first[f"{kind}_sums"], second[f"{kind}_sums"])]
        assert bits(first[f"{kind}_rms"]) == bits(want) == bits(second[f"{kind}_rms"])
    for got in (first, second):
        assert got["processes"] == "all-reduce"
        assert got["valid_positions"] == first["positions"] + second["positions"]
