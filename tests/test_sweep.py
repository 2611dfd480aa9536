# SPDX-License-Identifier: MIT
"""Sweeps: the grid, one cell's rows, Dask engines equal to the serial run bit for bit (a real
`dask scheduler` and two `dask worker` processes on 127.0.0.1), resume after a killed run, a
row recomputed alone, the depth check's figures and summary, and the CLI."""
import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from pydepth import PydepthError
from conftest import die_with_parent, free_port, need_extra

need_extra("sweep")

from pydepth.sweep import (  # noqa: E402
    Cell,
    DamagedPartError,
    OptimizerUnavailableError,
    RowNotFoundError,
    SweepResumeError,
    SweepSpec,
    SweepSpecError,
    parse_int_list,
    parse_row_id,
    read_table,
    rerun_row,
    run,
)
from pydepth.sweep.cell import COLUMNS, draw_batch, run_cells  # noqa: E402
from pydepth.sweep.run import plan_batches  # noqa: E402
from pydepth.sweep.store import part_files  # noqa: E402

SMALL = dict(depths=[1, 2, 4], widths=[4, 16], seeds=[0, 1, 2], sequence_length=4, steps=[0, 2])
ENV = dict(os.environ, PYDEPTH_NUM_THREADS="1")
TIMEOUT = 240  # a hang guard: the sanitizer job runs these subprocesses several times slower


def assert_bitwise_equal(a, b):
    """Every column but the wall time equal; float64 columns compared as bit patterns."""
    assert a.column_names == b.column_names
    assert a.num_rows == b.num_rows > 0
    for name in a.column_names:
        if name == "wall_time_s":
            continue
        x, y = a.column(name).to_numpy(), b.column(name).to_numpy()
        if x.dtype == np.float64:
            np.testing.assert_array_equal(x.view(np.uint64), y.view(np.uint64), err_msg=name)
        else:
            assert x.tolist() == y.tolist(), name
    assert a.schema.metadata == b.schema.metadata


def _spawn(args, log, cwd):
    """A Dask process writing into ``log``; the parent's copy of the file closes at once."""
    with open(log, "w") as out:
        return subprocess.Popen(args, cwd=cwd, env=ENV, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=die_with_parent)


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """A `dask scheduler` and two single-threaded `dask worker` processes on 127.0.0.1."""
    import distributed
    logs = tmp_path_factory.mktemp("dask-logs")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = []
    try:
        procs.append(_spawn(
            [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--dashboard-address", "127.0.0.1:0"], logs / "scheduler.log", logs))
        for i in range(2):
            procs.append(_spawn(
                [sys.executable, "-m", "dask", "worker", address, "--nthreads", "1", "--no-nanny",
                 "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0", "--name", f"w{i}"],
                logs / f"worker{i}.log", logs))
        deadline = time.monotonic() + TIMEOUT
        client = None
        while client is None:
            try:
                client = distributed.Client(address, timeout=10)
            except OSError:  # includes TimeoutError: the scheduler is still starting
                if time.monotonic() > deadline or procs[0].poll() is not None:
                    raise AssertionError(f"no dask scheduler at {address}: "
                                         + (logs / "scheduler.log").read_text()) from None
                time.sleep(0.2)
        try:
            client.wait_for_workers(2, timeout=TIMEOUT)
        except TimeoutError:
            raise AssertionError("two dask workers did not join: " + "".join(
                (logs / f"worker{i}.log").read_text() for i in range(2))) from None
        finally:
            client.close()
        yield address
        try:  # the scheduler retires its workers and exits: quicker than signals under load
            with distributed.Client(address, timeout=10) as client:
                client.shutdown()
        except (OSError, RuntimeError):
            pass
    finally:
        _stop(procs)


@pytest.fixture(scope="module")
def serial_small(tmp_path_factory):
    """The SMALL grid run serially in this process: the reference for every engine."""
    out = tmp_path_factory.mktemp("serial") / "run"
    result = run(SweepSpec(**SMALL), out=out, scheduler="serial", progress=False)
    assert result.cells_run == result.cells_total == 36
    return out


# -- the grid --------------------------------------------------------------------------------

def test_int_lists_read_ranges_and_commas():
    assert parse_int_list("0-4") == [0, 1, 2, 3, 4]
    assert parse_int_list("1,2, 8-9") == [1, 2, 8, 9]
    for bad in ("", "4-1", "a", "1,,x", "-3"):
        with pytest.raises(SweepSpecError):
            parse_int_list(bad)


@pytest.mark.parametrize("change, named", [
    (dict(depths=[0]), "depths"), (dict(widths=[5]), "head width 5"), (dict(seeds=[-1]), "seeds"),
    (dict(policies=["scaled", "other"]), "'other'"), (dict(steps=[1, 1]), "repeats 1"),
    (dict(sequence_length=0), "sequence_length"), (dict(lr=float("nan")), "lr"), (dict(betas=(0.9, 1.0)), "betas"),
    (dict(depths=[]), "depths"), (dict(weight_decay=-1.0), "weight_decay"), (dict(backend="jax"), "'jax'"),
    (dict(band=(5.0, 1.0)), "band"),
])
def test_bad_spec_values_are_refused_naming_them(change, named):
    d = dict(SMALL)
    d.update(change)
    with pytest.raises(SweepSpecError, match=named.replace("(", r"\(").replace("[", r"\[")) as info:
        SweepSpec(**d)
    assert isinstance(info.value, PydepthError)


def test_spec_round_trips_through_json_and_lists_every_cell():
    spec = SweepSpec(**dict(SMALL, steps="0,2"))
    again = SweepSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec and again.to_json() == spec.to_json()
    cells = spec.cells()
    assert len(cells) == 3 * 2 * 3 * 2 == len({c.cell_id for c in cells})
    with pytest.raises(SweepSpecError, match="unknown keys"):
        SweepSpec.from_dict(dict(SMALL, colour="red"))


def test_row_ids_name_cell_step_and_site():
    cell, step, site = parse_row_id("d8_w16_seed3_unscaled_step5_site12")
    assert (cell.depth, cell.width, cell.seed, cell.policy, step, site) == (8, 16, 3, "unscaled", 5, 12)
    with pytest.raises(SweepSpecError, match="not a row id"):
        parse_row_id("d8_w16")


def test_batches_carry_every_cell_once_and_at_least_the_minimum_work():
    spec = SweepSpec(depths=[1, 2, 4, 8, 16], widths=[16, 64], seeds=range(5))
    cells = spec.cells()
    batches = plan_batches(spec, cells, workers=2)
    flat = [c for b in batches for c in b]
    assert sorted(flat, key=lambda c: c.cell_id) == sorted(cells, key=lambda c: c.cell_id)
    assert 1 < len(batches) < len(cells)


# -- one cell ----------------------------------------------------------------------------------

def test_a_cell_gives_one_row_per_site_with_the_observers_values():
    import pydepth
    spec = SweepSpec(depths=[2], widths=[16], seeds=[7], policies=["scaled"], sequence_length=8)
    out = run_cells(spec.to_dict(), [(2, 16, 7, "scaled")])
    assert out["site"] == list(range(5)) and set(out["step"]) == {0}
    # independent path: the README's recipe on the same seed and batch
    cfg = spec.config(2, 16)
    fresh = pydepth.FreshDepthInitialization.prepare(
        cfg, pydepth.DepthInitializationBudget(cfg.parameter_count, cfg.max_positions), pydepth.SplitMix64(7))
    model = fresh.complete().model
    ids, targets = draw_batch(spec)
    fwd = model.forward(ids)
    loss = fwd.loss(targets)
    report = pydepth.observe_residual_health(model, fwd, loss)
    expect = np.array([r.activation_ratio for r in report.sites] + [r.adjoint_ratio for r in report.sites])
    got = np.array(out["activation_ratio"] + out["adjoint_ratio"])
    np.testing.assert_array_equal(got.view(np.uint64), expect.view(np.uint64))
    assert out["loss"] == [loss.item()] * 5
    assert ids.shape == (1, 8) and (ids[0, 1:] == targets[0, :-1]).all()


def test_unscaled_control_is_the_same_base_draw():
    spec = SweepSpec(depths=[1, 4], widths=[16], seeds=[3], sequence_length=4)
    one = run_cells(spec.to_dict(), [(1, 16, 3, "scaled"), (1, 16, 3, "unscaled")])
    half = len(one["row_id"]) // 2
    # at one block the factor is 1: both policies are the very same model
    assert one["activation_ratio"][:half] == one["activation_ratio"][half:]
    four = run_cells(spec.to_dict(), [(4, 16, 3, "scaled"), (4, 16, 3, "unscaled")])
    assert four["factor"][0] == 0.5 and four["factor"][-1] == 1.0
    assert four["activation_ratio"][:9] != four["activation_ratio"][9:]


def test_steps_follow_adamw_on_the_fixed_batch():
    """Independent path: plain loss.backward() and AdamW.step() for every step, observation
    with gradients untouched at the listed steps; the sweep's rows equal it bit for bit."""
    import pydepth
    from pydepth.optim import AdamW
    from pydepth.sweep.cell import build_model
    spec = SweepSpec(depths=[4], widths=[16], seeds=[5], policies=["scaled", "unscaled"], steps=[0, 1, 3],
                     sequence_length=8, lr=3e-3, weight_decay=0.05)
    for policy in ("scaled", "unscaled"):
        out = run_cells(spec.to_dict(), [(4, 16, 5, policy)])
        assert sorted(set(out["step"])) == [0, 1, 3] and not any(out["error"])
        model, _ = build_model(spec, Cell(4, 16, 5, policy))
        opt = AdamW(model.parameters, lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)
        ids, targets = draw_batch(spec)
        expect, losses = [], []
        for t in range(4):
            model.zero_grad()
            fwd = model.forward(ids)
            loss = fwd.loss(targets)
            if t in (0, 1, 3):
                report = pydepth.observe_residual_health(model, fwd, loss, accumulate_gradients=False)
                expect += [(r.activation_ratio, r.adjoint_ratio) for r in report.sites]
                losses += [loss.item()] * len(report.sites)
            loss.backward()
            opt.step()
        got = np.array(list(zip(out["activation_ratio"], out["adjoint_ratio"])))
        np.testing.assert_array_equal(got.view(np.uint64), np.array(expect).view(np.uint64))
        np.testing.assert_array_equal(np.array(out["loss"]).view(np.uint64), np.array(losses).view(np.uint64))
        assert losses[-1] < losses[0]  # the fixed batch is being fitted


def test_steps_after_zero_refused_before_any_work_without_the_optimizer(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pydepth.optim", None)  # as if pydepth.optim were missing
    with pytest.raises(OptimizerUnavailableError, match=r"pydepth\.optim\.AdamW"):
        run(SweepSpec(**SMALL), out=tmp_path / "never", scheduler="serial", progress=False)
    assert not (tmp_path / "never").exists()
    run(SweepSpec(**dict(SMALL, steps=[0])), out=tmp_path / "zero", scheduler="serial", progress=False)


def test_a_refused_update_ends_the_cell_with_an_error_row(monkeypatch):
    from pydepth import optim
    from pydepth.errors import NonFiniteUpdateError

    def refuse(self):
        raise NonFiniteUpdateError("AdamW step 1 refused: x would become inf")
    monkeypatch.setattr(optim.AdamW, "step", refuse)
    spec = SweepSpec(depths=[2], widths=[4], seeds=[0], policies=["scaled"], steps=[0, 2], sequence_length=4)
    out = run_cells(spec.to_dict(), [(2, 4, 0, "scaled")])
    assert out["step"] == [0] * 5 + [1] and out["site"][-1] == -1
    assert out["error"][-1] == "NonFiniteUpdateError: AdamW step 1 refused: x would become inf"
    assert np.isnan(out["activation_ratio"][-1]) and out["within_band"][-1] is False


def test_torch_backend_agrees_with_the_core_through_the_bridge_observer(tmp_path):
    """The same cells through pydepth's torch twin, the hook observer and torch.optim.AdamW:
    equal to the C core's rows to rounding (torch sums in its own order), reproducible alone."""
    need_extra("torch")
    grid = dict(depths=[2, 8], widths=[16], seeds=[0], steps=[0, 1, 3], sequence_length=8)
    cells = [(d, 16, 0, p) for d in (2, 8) for p in ("scaled", "unscaled")]
    core = run_cells(SweepSpec(**grid).to_dict(), cells)
    spec = SweepSpec(**grid, backend="torch")
    bridge = run_cells(spec.to_dict(), cells)
    assert bridge["row_id"] == core["row_id"] and not any(bridge["error"])
    for key in ("activation_ratio", "adjoint_ratio", "loss"):
        a, b = np.array(core[key]), np.array(bridge[key])
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=0, err_msg=key)
    run(spec, out=tmp_path / "torch", scheduler="serial", progress=False)
    assert rerun_row(tmp_path / "torch", "d8_w16_seed0_unscaled_step3_site9").identical


# -- engines -----------------------------------------------------------------------------------

def test_sweep_through_dask_scheduler_and_two_workers_equals_serial_run_bit_for_bit(
        dask_cluster, serial_small, tmp_path):
    result = run(SweepSpec(**SMALL), out=tmp_path / "dist", scheduler=dask_cluster, progress=False)
    assert result.engine == f"dask scheduler {dask_cluster}" and result.workers == 2
    assert result.cells_run == 36
    assert_bitwise_equal(read_table(serial_small), read_table(tmp_path / "dist"))


def test_dask_scheduler_address_from_the_environment(dask_cluster, serial_small, tmp_path, monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", dask_cluster)
    result = run(SweepSpec(**SMALL), out=tmp_path / "env", progress=False)
    assert result.engine == f"dask scheduler {dask_cluster}"
    assert_bitwise_equal(read_table(serial_small), read_table(tmp_path / "env"))


def test_local_default_cluster_and_threads_equal_serial_run_bit_for_bit(serial_small, tmp_path, monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    local = run(SweepSpec(**SMALL), out=tmp_path / "local", workers=2, progress=False)
    assert local.engine == "local Dask cluster, 2 worker processes"
    threads = run(SweepSpec(**SMALL), out=tmp_path / "threads", scheduler="threads", workers=2, progress=False)
    assert threads.engine.startswith("local Dask cluster, 1 worker x 2 threads")
    for d in ("local", "threads"):
        assert_bitwise_equal(read_table(serial_small), read_table(tmp_path / d))


def test_unreachable_scheduler_is_a_sweep_error(tmp_path, monkeypatch):
    from pydepth.sweep import SweepError
    from pydepth.sweep import run as run_sweep
    monkeypatch.setattr(importlib.import_module("pydepth.sweep.run"), "CONNECT_TIMEOUT", 1.0)
    with pytest.raises(SweepError, match="cannot reach the Dask scheduler"):
        run_sweep(SweepSpec(**SMALL), out=tmp_path / "x", scheduler=f"tcp://127.0.0.1:{free_port()}",
                  progress=False)


# -- the store: resume and rerun --------------------------------------------------------------

def test_stored_rows_carry_the_spec_version_and_exact_columns(serial_small):
    import pydepth
    table = read_table(serial_small)
    meta = table.schema.metadata
    assert json.loads(meta[b"pydepth.sweep.spec"]) == SweepSpec(**SMALL).to_dict()
    assert meta[b"pydepth.version"].decode() == pydepth.__version__
    assert table.column_names == [n for n, _ in COLUMNS]
    assert str(table.schema.field("activation_ratio").type) == "double"
    assert table.num_rows == sum(2 * d + 1 for d in SMALL["depths"]) * 2 * 3 * 2 * len(SMALL["steps"])


def test_resume_skips_stored_cells_and_refuses_another_spec(serial_small, tmp_path):
    again = run(SweepSpec(**SMALL), out=serial_small, scheduler="serial", progress=False)
    assert again.cells_run == 0 and again.cells_resumed == 36
    with pytest.raises(SweepResumeError, match="different sweep"):
        run(SweepSpec(**dict(SMALL, seeds=[0])), out=serial_small, scheduler="serial", progress=False)
    with pytest.raises(SweepResumeError, match="already holds"):
        run(SweepSpec(**SMALL), out=serial_small, scheduler="serial", resume=False, progress=False)


def test_killed_sweep_resumes_to_the_uninterrupted_result(tmp_path):
    grid = ["--depths", "8,16", "--widths", "64", "--seeds", "0-9", "--sequence-length", "32"]
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "pydepth", "sweep", *grid, "--scheduler", "serial",
                             "--quiet", "--out", str(killed)], cwd=tmp_path, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not part_files(killed) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    written = len(part_files(killed))
    spec = SweepSpec(depths=[8, 16], widths=[64], seeds=range(10), sequence_length=32)
    total_batches = len(plan_batches(spec, spec.cells(), workers=1))
    assert 1 <= written < total_batches, "the kill should land between the first and the last batch"
    stored = read_table(killed).num_rows
    resumed = run(spec, out=killed, scheduler="serial", progress=False)
    assert 0 < resumed.cells_resumed < 40 and resumed.cells_run == 40 - resumed.cells_resumed
    assert stored > 0
    whole = run(spec, out=tmp_path / "whole", scheduler="serial", progress=False)
    assert whole.cells_run == 40
    assert_bitwise_equal(read_table(tmp_path / "whole"), read_table(killed))


def test_a_row_recomputed_alone_is_bit_identical(serial_small):
    result = rerun_row(serial_small, "d4_w16_seed2_unscaled_step0_site7")
    assert result.identical
    assert {c.column for c in result.comparisons} == {n for n, _ in COLUMNS}
    assert "every stored value is bit-identical" in result.to_table()
    with pytest.raises(RowNotFoundError, match="d4_w16_seed9"):
        rerun_row(serial_small, "d4_w16_seed9_unscaled_step0_site7")


def test_parts_are_read_in_the_calling_thread_so_no_arrow_reader_thread_outlives_a_cli_run(tmp_path, monkeypatch):
    # Arrow's reader threads made `pydepth sweep --rerun` abort at exit now and then (SIGABRT,
    # "terminate called without an active exception"; about 1 run in 25 on a loaded machine).
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pydepth.sweep.verify as verify
    out = tmp_path / "r"
    run(SweepSpec(depths=[2], widths=[4], seeds=[0], policies=["scaled"], sequence_length=4), out=out,
        scheduler="serial", progress=False)
    calls = []

    class Recording:
        def __getattr__(self, name):
            return getattr(pq, name)

        def read_table(self, *args, **kwargs):
            calls.append(kwargs)
            return pq.read_table(*args, **kwargs)

    monkeypatch.setattr(verify, "pyarrow_modules", lambda: (pa, Recording()))
    assert read_table(out).num_rows > 0
    assert calls and all(c.get("use_threads") is False and c.get("pre_buffer") is False for c in calls), calls


def test_rerun_detects_a_changed_stored_bit(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    out = tmp_path / "r"
    run(SweepSpec(depths=[2], widths=[4], seeds=[0], policies=["scaled"], sequence_length=4), out=out,
        scheduler="serial", progress=False)
    [part] = part_files(out)
    table = pq.read_table(part)
    ratios = table.column("adjoint_ratio").to_numpy().copy()
    ratios[3] = np.nextafter(ratios[3], np.inf)  # one ulp
    i = table.column_names.index("adjoint_ratio")
    table = table.set_column(i, table.schema.field(i), pa.array(ratios))
    pq.write_table(table, part)
    row = table.column("row_id")[3].as_py()
    with pytest.raises(DamagedPartError, match=part.name):  # the manifest's hash notices first
        rerun_row(out, row)
    manifest = json.loads((out / "_manifest.json").read_text())
    del manifest["parts"][part.name]  # an unrecorded part is verified alone (checksums, spec, no twin)
    (out / "_manifest.json").write_text(json.dumps(manifest))
    result = rerun_row(out, row)
    assert not result.identical
    assert [c.column for c in result.comparisons if not c.identical] == ["adjoint_ratio"]
    cli = subprocess.run([sys.executable, "-m", "pydepth", "sweep", "--rerun", str(out), row],
                         cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=TIMEOUT)
    assert cli.returncode == 1 and "MISMATCH: adjoint_ratio" in cli.stdout
    ok = subprocess.run([sys.executable, "-m", "pydepth", "sweep", "--rerun", str(out),
                         table.column("row_id")[2].as_py()],
                        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=TIMEOUT)
    assert ok.returncode == 0, ok.stderr


# -- the depth check and the CLI -------------------------------------------------------------

def _rows_read_by(tool, out):
    if tool == "polars":
        import polars
        return polars.read_parquet(out / "*.parquet").height
    import duckdb
    return duckdb.sql(f"select count(*) from read_parquet('{out / '*.parquet'}')").fetchall()[0][0]


def test_depth_check_writes_figures_summary_and_data(tmp_path):
    cli = subprocess.run([sys.executable, "-m", "pydepth", "depth-check", "--depths", "1,2,4",
                          "--widths", "4,16", "--seeds", "0-2", "--observe-at", "0,1", "--sequence-length", "4",
                          "--scheduler", "serial", "--quiet", "--out", str(tmp_path / "dc"),
                          "--plot", str(tmp_path / "dc" / "_figures")],
                         cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=TIMEOUT)
    assert cli.returncode == 0, cli.stderr
    out = tmp_path / "dc"
    for stem in ("depth-check-w4", "depth-check-w16", "sites-d4-w4", "sites-d4-w16"):
        png = (out / "_figures" / f"{stem}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
        assert (out / "_figures" / f"{stem}.svg").read_text().lstrip().startswith("<?xml")
    assert not list(out.glob("*.png")) and not list(out.glob("*.svg"))  # the parts' folder holds no figure
    import pandas
    import pyarrow.dataset
    rows = read_table(out).num_rows  # other tools read the directory as it is, with no options
    assert pyarrow.dataset.dataset(out).to_table().num_rows == rows
    assert len(pandas.read_parquet(out)) == rows
    for tool in ("polars", "duckdb"):
        if importlib.util.find_spec(tool) is not None:
            assert _rows_read_by(tool, out) == rows
    summary = (out / "_summary.txt").read_text()
    assert "First depth out of the band" in summary and summary.strip() in cli.stdout
    assert max(len(line) for line in summary.splitlines()) <= 100
    assert "unscaled" in summary and " of 3 seeds" in summary.replace("\n  ", " ")
    assert read_table(out).num_rows == sum(2 * d + 1 for d in (1, 2, 4)) * 2 * 3 * 2 * 2  # two steps


def test_depth_check_figures_clip_no_text_and_mark_out_of_band_seeds(serial_small):
    from pydepth.plots.style import pyplot, texts_outside_figure
    from pydepth.sweep.plots import depth_check_figure, site_heatmap_figure
    from pydepth.sweep.summary import cell_steps
    table = read_table(serial_small)
    steps = cell_steps(table)
    tight = (0.01, 1.5)  # every deep unscaled seed is outside: its crosses must be drawn
    fig = depth_check_figure(steps, 16, tight)
    assert texts_outside_figure(fig) == []
    from matplotlib.colors import to_rgba

    from pydepth.plots.style import OUT_OF_BAND_COLOR
    red = to_rgba(OUT_OF_BAND_COLOR)
    marked = sum(len(c.get_offsets()) for ax in fig.axes for c in ax.collections
                 if len(c.get_facecolor()) and tuple(c.get_facecolor()[0]) == red)
    outside = sum(int(not 0.01 <= v <= 1.5) for cs in steps if cs.width == 16
                  for v in (cs.activation_max, cs.adjoint_max))
    assert marked == outside > 0
    pyplot().close(fig)
    heat = site_heatmap_figure(table, 4, 16, tight)
    assert texts_outside_figure(heat) == []
    pyplot().close(heat)


def test_band_exit_counts_seeds_at_the_first_depth_out():
    from pydepth.sweep.summary import CellStep, band_exits
    def cs(depth, seed, ok):
        return CellStep(depth, 16, seed, "unscaled", 0, 150.0 if not ok else 5.0, 1.0, 1.0, 0.5,
                        5.0, ok, "")
    steps = [cs(8, 0, True), cs(8, 1, True), cs(32, 0, False), cs(32, 1, True), cs(64, 0, False),
             cs(64, 1, False)]
    [e] = band_exits(steps, (0.01, 100.0))
    assert (e.depth, e.seeds_out, e.seeds, e.deepest_seeds_out) == (32, 1, 2, 2)
    assert e.sentence().startswith("unscaled leaves the band at depth 32 in 1 of 2 seeds")
    assert "activation ratio above 100" in e.cause


def test_sweep_cli_reads_a_spec_file_and_options_override_it(tmp_path):
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(dict(SMALL, seeds=[0, 1, 2, 3])))
    cli = subprocess.run([sys.executable, "-m", "pydepth", "sweep", str(spec_file), "--seeds", "5",
                          "--scheduler", "serial", "--out", str(tmp_path / "o")],
                         cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=TIMEOUT)
    assert cli.returncode == 0, cli.stderr
    assert "12 cells computed" in cli.stdout and "cells/s" in cli.stderr
    assert set(read_table(tmp_path / "o").column("seed").to_pylist()) == {5}


def test_sweep_cli_refuses_bad_grids_with_a_message(tmp_path):
    for argv, message in ((["--depths", "1", "--widths", "3", "--seeds", "0"], "head width 3"),
                          (["--depths", "1", "--seeds", "0"], "needs --widths"),
                          (["--depths", "1", "--widths", "4", "--seeds", "0", "--policies", "x"], "'x'")):
        cli = subprocess.run([sys.executable, "-m", "pydepth", "sweep", *argv, "--scheduler", "serial",
                              "--out", str(tmp_path / "bad")], cwd=tmp_path, env=ENV,
                             capture_output=True, text=True, timeout=TIMEOUT)
        assert cli.returncode in (1, 2) and message in cli.stderr, (argv, cli.stderr)
        assert "Traceback" not in cli.stderr
    assert not part_files(tmp_path / "bad")


@pytest.mark.parametrize("command", ["sweep", "depth-check"])
def test_commands_name_the_sweep_extra_when_it_is_missing(tmp_path, command):
    code = ("import sys; sys.modules['distributed'] = None; from pydepth.cli import main; "
            f"sys.exit(main(['{command}', '--depths', '1', '--widths', '4', '--seeds', '0', "
            f"'--out', 'o']))")
    cli = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=ENV, capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert cli.returncode == 2
    assert "pip install 'pydepth[sweep]'" in cli.stderr and "Traceback" not in cli.stderr
    assert not (tmp_path / "o").exists()
