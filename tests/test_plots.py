# SPDX-License-Identifier: MIT
"""Ratio plots in the shared style: nothing clipped, integer site ticks labelled by stage, the
band shaded on a log axis, out-of-band points marked and annotated, titles naming model, depth,
seed and policy, a control overlay through the public API, PNG and SVG."""
import json

import numpy as np
import pytest

from pydepth import DecoderConfig, cli
from pydepth.health import health_report_from_rms
from conftest import need_extra


@pytest.fixture(autouse=True)
def _matplotlib():
    need_extra("plot")
    with np.errstate(all="ignore"):  # conftest raises on every floating-point event; matplotlib's own
        yield


@pytest.fixture(scope="module")
def doc():
    from pydepth.chapter.demo import demo_trace
    return demo_trace()


def synthetic(n_sites, activation, adjoint, band=None):
    return health_report_from_rms(activation, adjoint, valid_positions=4, width=8, band=band)


def out_of_band_report():
    # 3 blocks; the last activation (right edge) and the first adjoint (left edge) leave the band
    acts = [1.0, 2.0, 5.0, 9.0, 20.0, 60.0, 107.04]
    grads = [250.0, 40.0, 9.0, 3.0, 2.0, 1.5, 1.0]
    return synthetic(7, acts, grads)


def figures(doc):
    from pydepth.plots.health import report_figure
    narrow1, narrow8 = doc["fixtures"][0], doc["fixtures"][2]
    yield "one block", report_figure(narrow1["initialized"], model="narrow", seed=4701, policy="p")
    yield "eight blocks with control", report_figure(
        narrow8["initialized"], control=narrow8["same_base_unscaled_control"], model="narrow", seed=4701)
    yield "out of band", report_figure(out_of_band_report(), control=out_of_band_report(),
                                       model="synthetic " * 12, seed=2**64 - 1, policy="long-policy-name " * 6)
    yield "user title", report_figure(out_of_band_report(), title="a very long user title " * 20)
    yield "forty blocks", report_figure(synthetic(81, [1.0 + i for i in range(81)], [81.0 - i for i in range(81)]))


def test_every_text_artist_lies_inside_the_figure(doc):
    from pydepth.plots.style import pyplot, texts_outside_figure
    for name, fig in figures(doc):
        assert texts_outside_figure(fig) == [], name
        pyplot().close(fig)


def test_the_check_catches_a_clipped_label():
    from pydepth.plots.style import new_figure, pyplot, texts_outside_figure
    fig, (ax,) = new_figure(1)
    fig.set_layout_engine("none")
    ax.set_xlabel("x" * 400)
    assert texts_outside_figure(fig) == ["x" * 400]
    pyplot().close(fig)


def test_site_ticks_are_integers_labelled_by_stage(doc):
    from pydepth.plots.style import pyplot
    from pydepth.plots.health import report_figure
    fig = report_figure(doc["fixtures"][0]["initialized"])  # one block: three sites
    for ax in fig.axes:
        assert list(ax.get_xticks()) == [0, 1, 2]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0: input", "1: attn 0", "2: ffn 0"]
        assert ax.get_yscale() == "log"
    pyplot().close(fig)
    fig = report_figure(synthetic(81, [1.0] * 81, [1.0] * 81))
    ticks = fig.axes[0].get_xticks()
    assert all(float(t).is_integer() for t in ticks) and ticks[0] == 0 and len(ticks) <= 33
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels[0] == "0: input" and all(lab.startswith(f"{int(t)}: ") for t, lab in zip(ticks, labels))
    assert all(lab.split(": ")[1] in ("input", f"attn {(int(t) - 1) // 2}", f"ffn {int(t) // 2 - 1}")
               for t, lab in zip(ticks, labels))
    pyplot().close(fig)


def test_band_is_shaded_and_out_of_band_points_marked_and_annotated():
    from pydepth.plots.style import OUT_OF_BAND_COLOR, pyplot
    from pydepth.plots.health import report_figure
    fig = report_figure(out_of_band_report(), band=(0.01, 100.0))
    act, adj = fig.axes
    for ax, value in ((act, "107.04"), (adj, "250")):
        texts = [t.get_text() for t in ax.texts]
        assert texts == [value], texts
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "health band [0.01, 100]" in legend and "outside the band" in legend
        assert any(p.get_label().startswith("health band") for p in ax.patches)
        lo, hi = ax.get_ylim()
        assert lo < 0.01 and hi > 250
    red = [c for c in act.collections if c.get_label() == "outside the band"]
    assert len(red) == 1 and red[0].get_offsets().shape[0] == 1
    assert tuple(red[0].get_facecolor()[0][:3]) == pytest.approx(
        __import__("matplotlib").colors.to_rgb(OUT_OF_BAND_COLOR))
    pyplot().close(fig)
    fig = report_figure(out_of_band_report(), band=(0.001, 1000.0))  # nothing outside a wide band
    assert all(len(ax.texts) == 0 for ax in fig.axes)
    pyplot().close(fig)


def test_title_names_model_depth_seed_and_policy(doc):
    from pydepth.plots.style import pyplot
    from pydepth.plots.health import report_figure
    fig = report_figure(doc["fixtures"][2]["initialized"], model="narrow d4", seed=4701,
                        policy="residual-output-init-depth-v1")
    title = fig._suptitle.get_text().replace("\n", " ")
    for part in ("narrow d4", "depth 8", "seed 4701", "policy residual-output-init-depth-v1"):
        assert part in title
    pyplot().close(fig)


def test_plot_report_overlays_a_control_and_writes_png_and_svg(tmp_path, doc):
    from pydepth.plots.health import plot_report
    fx = doc["fixtures"][3]
    paths = plot_report(fx["initialized"], tmp_path / "bridge", control=fx["same_base_unscaled_control"],
                        formats=("png", "svg"))
    assert paths == [tmp_path / "bridge.png", tmp_path / "bridge.svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = paths[1].read_text()
    assert "<svg" in svg[:2000] and "same-base unscaled control" in svg
    assert plot_report(out_of_band_report(), tmp_path / "one.svg") == [tmp_path / "one.svg"]
    nested = tmp_path / "new" / "dir" / "one.png"
    assert plot_report(out_of_band_report(), nested) == [nested] and nested.stat().st_size > 0


def test_plot_report_refuses_bad_input(tmp_path, doc):
    from pydepth.plots.health import plot_report
    fx = doc["fixtures"]
    with pytest.raises(ValueError, match="control has 17 sites, the report 3"):
        plot_report(fx[0]["initialized"], tmp_path / "x.png", control=fx[2]["initialized"])
    with pytest.raises(TypeError, match="DepthHealthReport"):
        plot_report([1, 2], tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"must end in \.png, \.svg or \.pdf"):
        plot_report(fx[0]["initialized"], tmp_path / "x.jpeg")
    assert not list(tmp_path.iterdir())


def test_observe_control_plot_writes_both_formats(tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(DecoderConfig(266, 4, 1, 4, 8, 4).to_dict()))
    assert cli.main(["observe", "--config", str(cfg), "--seed", "4701", "--tokens", "0,99,100,101",
                     "--targets", "99,100,101,1", "--control", "--plot", str(tmp_path / "plots")]) == 0
    err = capsys.readouterr().err
    for suffix in ("png", "svg"):
        assert (tmp_path / "plots" / f"health.{suffix}").stat().st_size > 0 and f"health.{suffix}" in err
    assert "same-base unscaled control" in (tmp_path / "plots" / "health.svg").read_text()


def test_laptop_plot_uses_the_same_style(tmp_path, capsys):
    small = ["--vocabulary-size", "64", "--model-width", "8", "--layers", "2", "--heads", "2",
             "--kv-heads", "1", "--feed-forward-width", "8", "--max-positions", "8"]
    assert cli.main(["laptop", *small, "--control", "--plot", str(tmp_path)]) == 0
    assert (tmp_path / "laptop.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in capsys.readouterr().err


def test_helpers_for_other_figures_keep_the_style():
    # what sweep and training plots build on: sites on a heat map's y axis, a shaded seed spread
    from pydepth.plots.style import (SERIES_STYLES, new_figure, pyplot, shade_spread, site_axis,
                                    texts_outside_figure)
    fig, (heat, curve) = new_figure(2)
    heat.imshow(np.ones((9, 3)), aspect="auto", origin="lower")
    site_axis(heat, 9, axis="y")
    assert list(heat.get_yticks()) == list(range(9))
    assert heat.get_yticklabels()[2].get_text() == "2: ffn 0"
    shade_spread(curve, [1, 2, 4], [1, 2, 3], [2, 3, 5], style=1, label="seed spread")
    band = curve.collections[0]
    assert band.get_label() == "seed spread"
    assert tuple(band.get_facecolor()[0][:3]) == pytest.approx(
        __import__("matplotlib").colors.to_rgb(SERIES_STYLES[1]["color"]))
    assert texts_outside_figure(fig) == []
    pyplot().close(fig)
