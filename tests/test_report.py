# SPDX-License-Identifier: MIT
"""``pydepth report DIR``: one self-contained HTML page for each kind of output directory, which a
real browser (headless Chromium) loads without errors, with every figure drawn."""
import json
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import need_extra

need_extra("plot", "sweep")  # the report draws figures; sweep outputs are Parquet

from pydepth.cli import main  # noqa: E402
from pydepth.errors import PydepthError, ReportInputError  # noqa: E402
from pydepth.report import build_report, write_report  # noqa: E402

CONFIG = {"vocabulary_size": 266, "model_width": 16, "heads": 2, "feed_forward_width": 20, "layers": 2,
          "max_positions": 16}
CORPUS = pathlib.Path(__file__).resolve().parents[1] / "examples" / "data" / "corpus.txt"
SWEEP = ["--depths", "1,2", "--widths", "16", "--seeds", "0", "--observe-at", "0,1", "--workers", "1", "--quiet"]


def _observe(root: pathlib.Path) -> pathlib.Path:
    (root / "cfg.json").write_text(json.dumps(CONFIG))
    assert main(["observe", "--config", str(root / "cfg.json"), "--seed", "1", "--tokens", "0,99,100,101",
                 "--targets", "99,100,101,1", "--control", "--format", "json",
                 "--output", str(root / "obs" / "observe.json")]) == 0
    return root / "obs"


def _train(root: pathlib.Path) -> pathlib.Path:
    config = dict(CONFIG, vocabulary_size=256)
    (root / "byte.json").write_text(json.dumps(config))
    assert main(["train", str(CORPUS), "--config", str(root / "byte.json"), "--updates", "4", "--batch-rows", "2",
                 "--observe-every", "2", "--out", str(root / "train")]) == 0
    return root / "train"


def _sweep(root: pathlib.Path) -> pathlib.Path:
    assert main(["sweep", *SWEEP, "--out", str(root / "sweep")]) == 0
    return root / "sweep"


def _depth_check(root: pathlib.Path) -> pathlib.Path:
    main(["depth-check", *SWEEP, "--out", str(root / "dc")])  # exits 1 when a policy leaves the band
    return root / "dc"


def _demo(root: pathlib.Path) -> pathlib.Path:
    assert main(["demo", "--format", "json", "--output", str(root / "demo" / "demo.json")]) == 0
    return root / "demo"


def _depth_transfer(root: pathlib.Path) -> pathlib.Path:
    assert main(["depth-transfer", str(CORPUS), "--parametrizations", "standard,depth-mup", "--depths", "1,2",
                 "--lrs", "0.004,0.016,0.064", "--seeds", "0", "--model-width", "8", "--sequence-length", "8",
                 "--batch-rows", "2", "--updates", "2", "--warmup", "0", "--scheduler", "serial", "--quiet",
                 "--out", str(root / "dt")]) == 0
    return root / "dt"


MAKERS = {"observe": _observe, "train": _train, "sweep": _sweep, "depth-check": _depth_check, "demo": _demo,
          "depth-transfer": _depth_transfer}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("outputs")
    return {kind: make(root) for kind, make in MAKERS.items()}


@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_report_names_its_kind_and_holds_figures_tables_versions_and_the_verify_status(outputs, kind):
    page = build_report(outputs[kind])
    assert f"pydepth {kind}:" in page
    assert page.count("<svg") >= 1 and "<table>" in page
    assert "How to read this" in page and "pydepth verify on this machine" in page
    assert "bit-exact" in page and "kernel path" in page


@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_report_loads_nothing_from_outside_the_file(outputs, kind):
    page = build_report(outputs[kind])
    assert "<script" not in page and "<link" not in page and "@import" not in page
    for attribute in re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page):
        assert attribute.startswith(("#", "data:")), attribute[:80]  # SVG defs and inline images only


def test_the_command_writes_the_page_beside_the_directory_and_says_where(outputs, capsys):
    target = outputs["observe"].with_name("obs-report.html")
    assert main(["report", str(outputs["observe"])]) == 0
    assert target.is_file() and f"wrote {target}" in capsys.readouterr().out


def test_a_demo_report_shows_every_fixtures_verdict_and_its_control_with_one_figure_each(outputs):
    doc = json.loads((outputs["demo"] / "demo.json").read_text())
    page = build_report(outputs["demo"])
    assert page.count("<figure>") == len(doc["fixtures"]) > 0
    for fx in doc["fixtures"]:
        assert f"{fx['id']}: " in page and f"{fx['id']} initialized" in page and f"{fx['id']} control" in page
        assert f"{fx['initialized']['activation_ratio_max']:.4g}" in page


def test_a_malformed_demo_document_is_refused_naming_the_field(outputs, tmp_path):
    run = shutil.copytree(outputs["demo"], tmp_path / "demo")
    doc = json.loads((run / "demo.json").read_text())
    doc["fixtures"][1]["same_base_unscaled_control"]["sites"][2]["adjoint_ratio"] = "big"
    (run / "demo.json").write_text(json.dumps(doc))
    with pytest.raises(ReportInputError, match=r"fixtures\[1\]\.same_base_unscaled_control\.sites\[2\]\.adjoint_ratio"):
        build_report(run)


def test_a_directory_of_no_known_output_is_refused_naming_it(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ReportInputError, match="holds no pydepth output"):
        build_report(tmp_path)
    with pytest.raises(ReportInputError, match="is not a directory"):
        build_report(tmp_path / "missing")
    assert issubclass(ReportInputError, PydepthError)
    assert main(["report", str(tmp_path)]) == 1


def test_a_torn_last_log_line_is_left_out_and_a_torn_middle_line_is_refused(outputs, tmp_path):
    run = shutil.copytree(outputs["train"], tmp_path / "run")
    log = run / "train.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines) + '\n{"step": 5, "lo')
    assert f"{len(lines)} steps" in build_report(run)
    log.write_text('{"step": 1, "lo\n' + "\n".join(lines) + "\n")
    with pytest.raises(ReportInputError, match="line 1 is not JSON"):
        build_report(run)


# The probe a test adds to its copy of the page: errors, drawn figures and loaded resources.
PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || e.type)), true);
const __ce = console.error; console.error = (...a) => { window.__errors.push(a.join(' ')); __ce(...a); };
window.addEventListener('load', () => {
  const figures = [...document.querySelectorAll('figure > svg')];
  const drawn = figures.filter(s => { const r = s.getBoundingClientRect();
    return r.width > 100 && r.height > 100 && s.querySelectorAll('path, text, image').length > 0; });
  document.documentElement.setAttribute('data-probe', JSON.stringify({errors: window.__errors,
    figures: figures.length, drawn: drawn.length,
    resources: performance.getEntriesByType('resource').map(r => r.name)}));
});
</script>"""


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _png_pixels(path: pathlib.Path):
    from matplotlib import image
    return image.imread(str(path))


@pytest.mark.skipif(_chromium() is None, reason="needs a Chromium binary (Debian: apt-get install chromium)")
@pytest.mark.parametrize("kind", list(MAKERS))
def test_headless_chromium_shows_every_figure_with_no_console_error_and_a_screenshot_that_is_not_blank(
        outputs, kind, tmp_path):
    page = build_report(outputs[kind])
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("<head>", "<head>" + PROBE, 1))
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=1200,1600", "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run([*flags, "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=120)
    probe = json.loads(re.search(r"data-probe=\"([^\"]*)\"", dom.stdout).group(1).replace("&quot;", '"'))
    assert probe["errors"] == [] and "CONSOLE" not in dom.stderr.replace("CONSOLE(0)", "")
    assert probe["figures"] == page.count("<figure>") > 0 and probe["drawn"] == probe["figures"]
    assert [r for r in probe["resources"] if not r.startswith("file:")] == []
    shot = tmp_path / "shot.png"
    original = write_report(outputs[kind], tmp_path / "page.html")
    subprocess.run([*flags, f"--screenshot={shot}", original.as_uri()], capture_output=True, timeout=120)
    pixels = _png_pixels(shot)
    assert pixels.shape[0] > 500 and float(pixels[..., :3].std()) > 0.05
