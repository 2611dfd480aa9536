# SPDX-License-Identifier: MIT
"""The depth-transfer study: a tiny grid stored, resumed after an interruption to the same table,
any cell recomputed bit for bit, the engines equal to the serial run, the summary's maths
(parabola refinement, octave drift) against hand-built curves, the CLI and the report section."""
import math
import pathlib

import numpy as np
import pytest

from conftest import need_extra

need_extra("sweep")

from pydepth import cli  # noqa: E402
from pydepth._native._rng import SplitMix64  # noqa: E402
from pydepth.depth_init import DepthInitializationBudget, FreshDepthInitialization  # noqa: E402
from pydepth.parametrizations import build_parametrized  # noqa: E402
from pydepth.sweep import (  # noqa: E402
    RowNotFoundError,
    SweepResumeError,
    SweepSpecError,
    TransferCell,
    depth_transfer,
    read_transfer_table,
    rerun_transfer_cell,
    transfer_spec,
)
from pydepth.sweep import transfer as transfer_module  # noqa: E402
from pydepth.sweep.errors import SweepStoreError  # noqa: E402
from pydepth.sweep.transfer_cell import UNCOMPARED, build_cell  # noqa: E402
from pydepth.sweep.transfer_summary import CurvePoint, drifts, optima, refine_minimum  # noqa: E402

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "examples" / "data" / "corpus.txt"
TINY = dict(parametrizations=["chapter", "standard", "gpt2"], depths=[1, 2], lrs=[2.0**-8, 2.0**-6, 2.0**-4],
            seeds=[0], width=8, sequence_length=8, batch_rows=2, eval_rows=2, updates=3, warmup=1)


def tiny(**changes):
    return transfer_spec(CORPUS, **{**TINY, **changes})


def run_tiny(out, spec=None, **kw):
    return depth_transfer(spec or tiny(), CORPUS, out=out, scheduler=kw.pop("scheduler", "serial"),
                          plots=False, progress=False, **kw)


def assert_same_table(a, b):
    """Every column but the measurements equal; float64 columns compared as bit patterns."""
    assert a.column_names == b.column_names and a.num_rows == b.num_rows > 0
    for name in a.column_names:
        if name in UNCOMPARED:
            continue
        x, y = a.column(name).to_numpy(), b.column(name).to_numpy()
        if x.dtype == np.float64:
            np.testing.assert_array_equal(x.view(np.uint64), y.view(np.uint64), err_msg=name)
        else:
            assert x.tolist() == y.tolist(), name


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    out = tmp_path_factory.mktemp("transfer") / "study"
    result = run_tiny(out)
    return out, result


def test_a_study_stores_one_row_per_cell_with_finite_held_out_losses(stored):
    out, result = stored
    table = read_transfer_table(out)
    assert result.cells_run == result.cells_total == table.num_rows == 3 * 2 * 3
    assert all(math.isfinite(v) for v in table.column("heldout_loss").to_pylist())
    assert all(e == "" for e in table.column("error").to_pylist())
    assert result.summary[0].startswith("verdict:")
    assert (out / "_summary.txt").read_text().splitlines() == result.summary


def test_a_resumed_study_after_an_interruption_gives_the_same_table(stored, tmp_path, monkeypatch):
    out = tmp_path / "resumed"
    real, written = transfer_module.write_part, []

    def write_then_die(*args, **kwargs):
        if len(written) == 4:
            raise KeyboardInterrupt  # the study is killed after four finished cells
        written.append(real(*args, **kwargs))
        return written[-1]

    monkeypatch.setattr(transfer_module, "write_part", write_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_tiny(out)
    monkeypatch.setattr(transfer_module, "write_part", real)
    result = run_tiny(out)
    assert (result.cells_resumed, result.cells_run) == (4, result.cells_total - 4)
    assert_same_table(read_transfer_table(out), read_transfer_table(stored[0]))
    assert result.summary == stored[1].summary


def test_every_stored_cell_reruns_bit_for_bit_from_the_store_alone(stored):
    out, _ = stored
    for cell_id in read_transfer_table(out).column("cell_id").to_pylist():
        result = rerun_transfer_cell(out, cell_id)
        assert result.identical, result.to_table()
        assert sum(c.compared for c in result.comparisons) == len(result.comparisons) - len(UNCOMPARED)


def test_a_rerun_refuses_a_cell_outside_the_study_and_an_edited_text(stored, tmp_path):
    out, _ = stored
    with pytest.raises(RowNotFoundError, match="not a cell"):
        rerun_transfer_cell(out, "chapter_d3_lr0.00390625_seed0")
    with pytest.raises(SweepSpecError, match="not a depth-transfer cell id"):
        rerun_transfer_cell(out, "d1_w8_seed0_scaled_step0_site0")
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in out.iterdir():
        if p.is_file() and p.name != ".pydepth.lock":
            (copy / p.name).write_bytes(p.read_bytes())
    (copy / "_text.txt").write_bytes(CORPUS.read_bytes() + b"\nedited\n")
    with pytest.raises(SweepStoreError, match="SHA-256"):
        rerun_transfer_cell(copy, "chapter_d2_lr0.00390625_seed0")


def test_the_threads_engine_stores_the_serial_table_bit_for_bit(stored, tmp_path):
    run_tiny(tmp_path / "threads", scheduler="threads", workers=2)
    assert_same_table(read_transfer_table(tmp_path / "threads"), read_transfer_table(stored[0]))


def test_the_chapter_cell_is_todays_depth_scaled_model_bit_for_bit():
    spec = tiny(depths=[4])
    model, _ = build_cell(spec, TransferCell("chapter", 4, 2.0**-6, 7))
    cfg = spec.config(4)
    fresh = FreshDepthInitialization.prepare(cfg, DepthInitializationBudget.for_config(cfg), SplitMix64(7))
    today = fresh.complete().model
    for p, q in zip(model.parameters, today.parameters):
        assert p.name == q.name
        np.testing.assert_array_equal(p.value.view(np.uint64), q.value.view(np.uint64), err_msg=p.name)


def test_a_cell_is_the_build_parametrized_model_with_core_branch_multipliers_and_group_factors():
    spec = tiny(depths=[4])
    model, optimizer = build_cell(spec, TransferCell("completep-0.5", 4, 2.0**-6, 3))
    ref = build_parametrized(spec.config(4), "completep-0.5", seed=3, lr=2.0**-6)
    assert model.branch_multipliers == ref.model.branch_multipliers == (0.5,) * 4
    for p, q in zip(model.parameters, ref.model.parameters):
        np.testing.assert_array_equal(p.value.view(np.uint64), q.value.view(np.uint64), err_msg=p.name)
    assert optimizer.hyperparameters()["factors"] == ref.optimizer.hyperparameters()["factors"]
    assert optimizer.schedule is not None and optimizer.schedule(spec.warmup) == 2.0**-6


def test_a_study_refuses_another_text_unknown_names_and_too_few_learning_rates(stored, tmp_path):
    with pytest.raises(SweepSpecError, match="unknown parametrization"):
        tiny(parametrizations=["chapter", "mup-ish"])
    with pytest.raises(SweepSpecError, match="at least 3"):
        tiny(lrs=[0.01, 0.02])
    with pytest.raises(SweepResumeError, match="not the one the spec names"):
        depth_transfer(tiny(), b"another text\n\nwith two paragraphs\n", out=tmp_path / "x", scheduler="serial",
                       plots=False, progress=False)
    assert not (tmp_path / "x" / "_transfer.json").exists()


def parabola_points(name, depth, xs, vertex, curvature=0.25, base=2.0):
    return [CurvePoint(name, depth, 2.0**x, x, base + curvature * (x - vertex) ** 2, 1.0, 1.0, 1, 0) for x in xs]


def test_the_refined_minimum_is_the_vertex_of_a_parabola_through_the_grid_minimum():
    xs = [-10.0, -9.0, -8.0, -7.0, -6.0]
    x, i, how = refine_minimum(xs, [2.0 + 0.5 * (v + 7.7) ** 2 for v in xs])
    assert (i, how) == (2, "parabola") and x == pytest.approx(-7.7, abs=1e-12)
    assert refine_minimum(xs, [5.0, 4.0, 3.0, 2.0, 1.0])[1:] == (4, "edge")
    assert refine_minimum(xs, [5.0, 4.0, 1.0, math.inf, 0.5])[1:] == (4, "edge")
    assert refine_minimum(xs, [5.0, 3.0, 1.0, math.inf, 2.0]) == (-8.0, 2, "grid")
    assert refine_minimum(xs, [math.inf] * 5)[1:] == (-1, "none")
    uneven = [-10.0, -9.5, -8.0]
    x, _, how = refine_minimum(uneven, [(v + 9.25) ** 2 for v in uneven])
    assert how == "parabola" and x == pytest.approx(-9.25, abs=1e-12)


def test_the_drift_is_the_optimum_of_the_deepest_depth_minus_the_shallowest_in_octaves():
    xs = [-10.0, -9.0, -8.0, -7.0, -6.0, -5.0]
    points = (parabola_points("standard", 2, xs, -6.4) + parabola_points("standard", 8, xs, -8.1)
              + parabola_points("standard", 4, xs, -7.0) + parabola_points("completep", 2, xs, -7.3)
              + parabola_points("completep", 8, xs, -7.2))
    found = {(o.parametrization, o.depth): o for o in optima(points)}
    assert found[("standard", 8)].lr == pytest.approx(2.0**-8.1)
    moved = {d.parametrization: d for d in drifts(list(found.values()))}
    assert moved["standard"].octaves == pytest.approx(-8.1 + 6.4)
    assert moved["standard"].spread == pytest.approx(1.7)
    assert (moved["standard"].shallowest, moved["standard"].deepest) == (2, 8)
    assert moved["completep"].octaves == pytest.approx(0.1) and moved["completep"].edges == 0


def test_the_cli_runs_the_study_prints_the_verdict_first_and_reruns_a_cell(tmp_path, capsys):
    out = tmp_path / "cli"
    args = ["depth-transfer", str(CORPUS), "--out", str(out), "--parametrizations", "chapter,standard",
            "--depths", "1,2", "--lrs", "0.004,0.016,0.064", "--seeds", "0", "--model-width", "8",
            "--sequence-length", "8", "--batch-rows", "2", "--updates", "2", "--warmup", "0",
            "--scheduler", "serial", "--quiet"]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("verdict:") and "12 cells computed, 0 already stored" in printed
    assert cli.main(args) == 0
    assert "0 cells computed, 12 already stored" in capsys.readouterr().out
    assert cli.main(["depth-transfer", "--rerun", str(out), "standard_d2_lr0.016_seed0"]) == 0
    assert "every stored value is bit-identical" in capsys.readouterr().out
    assert cli.main(["depth-transfer", "--out", str(out)]) == 2


def test_the_report_of_a_study_has_its_verdict_drift_figure_and_table(stored):
    need_extra("plot")
    from pydepth.report import build_report
    page = build_report(stored[0])
    for heading in ("Verdict", "Drift", "Figure", "Best learning rate by depth", "Summary as printed"):
        assert f">{heading}<" in page, heading
    assert "<svg" in page and "pydepth depth-transfer" in page
