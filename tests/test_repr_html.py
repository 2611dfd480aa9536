# SPDX-License-Identifier: MIT
"""Notebook display (``_repr_html_``) of the result objects: well-formed HTML holding the verdict
and its numbers, a table, and an inline SVG figure when matplotlib is installed (the table alone,
and no error, without it)."""
import html
from html.parser import HTMLParser

import numpy as np

import pydepth
from conftest import need_extra

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Balance(HTMLParser):
    """Fails on a closing tag that closes nothing open or leaves a tag open inside it."""

    def __init__(self):
        super().__init__()
        self.open = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-3:]}"
        self.open.pop()


def assert_well_formed(text):
    parser = _Balance()
    parser.feed(text)
    parser.close()
    assert parser.open == [], f"left open: {parser.open}"


def report(layers=4):
    cfg = pydepth.DecoderConfig(266, 16, 2, 20, layers, 16)
    model = pydepth.DecoderModel(cfg, pydepth.SplitMix64(1))
    ids = (np.arange(9) * 31 + 5) % 266
    fwd = model.forward(ids[None, :-1])
    return pydepth.observe_residual_health(model, fwd, fwd.loss(ids[None, 1:]))


def test_a_health_report_shows_its_verdict_every_site_and_a_figure():
    need_extra("plot")
    rep = report()
    text = rep._repr_html_()
    assert_well_formed(text)
    assert html.escape(rep.verdict()) in text and "<table>" in text
    assert text.count("<tr>") == len(rep.sites) + 1
    for row in rep.sites:
        assert f"<td>{row.activation_ratio:.4g}</td>" in text and f"<td>{row.adjoint_ratio:.4g}</td>" in text
    assert text.count("<svg") == 1 and "<?xml" not in text


def test_without_matplotlib_a_health_report_shows_the_table_alone(monkeypatch):
    from pydepth.plots import style

    def missing():
        raise style.PlotDependencyError("no matplotlib here")
    monkeypatch.setattr(style, "pyplot", missing)  # what every figure of pydepth.plots asks first
    rep = report()
    text = rep._repr_html_()
    assert_well_formed(text)
    assert html.escape(rep.verdict()) in text and "<table>" in text and "<svg" not in text


def test_a_report_outside_the_band_says_so_with_its_worst_ratio():
    rep = pydepth.health.health_report_from_rms([1.0, 500.0, 2.0], [1.0, 1.0, 1.0], valid_positions=4, width=8)
    text = rep._repr_html_()
    assert not rep.within_band and "OUTSIDE the band" in text and "500" in text


def test_a_depth_check_result_shows_the_verdict_where_each_policy_leaves_the_band_and_a_figure(tmp_path):
    need_extra("sweep", "plot")
    from pydepth.sweep.presets import depth_check, depth_check_spec
    from pydepth.sweep.summary import verdict
    spec = depth_check_spec(depths=(1, 2), widths=(16,), seeds=(0,), steps=(0,))
    result = depth_check(spec, out=tmp_path / "dc", workers=1, plots=False, progress=False)
    for shown in (result, result.sweep):
        text = shown._repr_html_()
        assert_well_formed(text)
        assert html.escape(verdict(result.exits, spec.band)) in text
        assert text.count("<svg") == 1 and f"<td>{result.sweep.cells_total}</td>" in text
