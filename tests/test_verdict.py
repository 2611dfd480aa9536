# SPDX-License-Identifier: MIT
"""The verdict first: the first line of a health table says whether every ratio is in the band,
where the worst one is and by how much; one legend line defines the ratios; numbers print with
significant digits, so a tiny G_s is not shown as 0.000007."""
import json

from pydepth import DecoderConfig, cli
from pydepth.health import LEGEND, health_report_from_rms


def report(acts, grads):
    return health_report_from_rms(acts, grads, valid_positions=4, width=8)


def test_a_report_inside_the_band_says_so_on_its_first_line_with_the_ratio_ranges():
    lines = report([1.0, 2.0, 4.0], [0.5, 0.25, 1.0]).to_table("title").splitlines()
    assert lines[0] == "verdict: every site within the band [0.01, 100]: A_s/A_0 1 to 4, G_s/G_2L 0.25 to 1"
    assert lines[1] == LEGEND and "A_s/A_0" in LEGEND and "G_s/G_2L" in LEGEND and "band" in LEGEND
    assert lines[2] == "title"


def test_a_report_outside_the_band_names_the_worst_site_and_the_factor():
    first = report([1.0, 300.0, 2.0], [6.9e-6, 0.5, 1.0]).to_table().splitlines()[0]
    assert first.startswith("verdict: OUTSIDE the band [0.01, 100] at 2 of 3 sites; worst G_s/G_2L 6.9e-06 at input")
    assert first.endswith("1.45e+03x below the edge 0.01")


def test_small_values_print_with_significant_digits():
    text = report([1.0, 2.0, 3.0], [6.912e-6, 0.5, 1.0]).to_table()
    assert "6.912e-06" in text and "0.000007" not in text


def test_observe_prints_the_verdict_first(tmp_path, capsys):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(DecoderConfig(266, 4, 1, 4, 2, 4).to_dict()))
    assert cli.main(["observe", "--config", str(path), "--tokens", "0,99,100,101,1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("verdict: ") and out[1] == LEGEND


def test_the_html_report_opens_with_the_verdict_and_shows_model_and_control_side_by_side(tmp_path):
    import re

    from conftest import need_extra
    need_extra("plot")
    from pydepth.report import build_report
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(DecoderConfig(266, 4, 1, 4, 8, 4).to_dict()))
    assert cli.main(["observe", "--config", str(path), "--tokens", "0,99,100,101,1", "--control", "--format", "json",
                     "--output", str(tmp_path / "obs" / "observe.json"), "--quiet"]) == 0
    page = build_report(tmp_path / "obs")
    headings = re.findall(r"<h2[^>]*>(.*?)</h2>", page)
    assert headings[0] == "Verdict" and headings[1] == "How to read this"
    assert page.index("verdict: ") < page.index("<figure")
    assert "A_s/A_0 model</th><th>A_s/A_0 control" in page
    assert "<td>config.layers</td>" in page and '{"vocabulary_size"' not in page  # a table, not JSON
