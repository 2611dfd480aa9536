# SPDX-License-Identifier: MIT
"""``pydepth report`` reads only its own files: regular files inside DIR (no link out, no FIFO),
documents checked against their shape (ReportInputError naming file and field), labels drawn
as plain text, and the page replacing the old one atomically, never through a link."""
import json
import os
import pathlib
import re
import shutil

import pytest

from conftest import need_extra

need_extra("plot")

import pydepth.report as report  # noqa: E402
from pydepth.cli import main  # noqa: E402
from pydepth.errors import ReportInputError  # noqa: E402
from pydepth.report import build_report, write_report  # noqa: E402
from pydepth.report.page import Section  # noqa: E402

CONFIG = {"vocabulary_size": 266, "model_width": 16, "heads": 2, "feed_forward_width": 20, "layers": 2,
          "max_positions": 16}


@pytest.fixture(autouse=True)
def no_verify(monkeypatch):
    """The verify section runs the bit-exact fixtures; these tests are about the inputs."""
    monkeypatch.setattr(report, "verify_section", lambda: Section("verify", "<p>skipped</p>"))


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    root = tmp_path_factory.mktemp("observed")
    (root / "cfg.json").write_text(json.dumps(CONFIG))
    assert main(["observe", "--config", str(root / "cfg.json"), "--seed", "1", "--tokens", "0,99,100,101",
                 "--targets", "99,100,101,1", "--format", "json", "--output", str(root / "obs" / "observe.json")]) == 0
    return json.loads((root / "obs" / "observe.json").read_text())


def write_observe(tmp_path, doc):
    out = tmp_path / "obs"
    out.mkdir(exist_ok=True)
    (out / "observe.json").write_text(json.dumps(doc))
    return out


def test_a_link_where_the_page_goes_is_replaced_and_its_target_untouched(tmp_path, observed):
    out = write_observe(tmp_path, observed)
    secret = tmp_path / "dotfile"
    secret.write_text("keep me\n")
    (tmp_path / "obs-report.html").symlink_to(secret)
    target = write_report(out)
    assert secret.read_text() == "keep me\n"
    assert not target.is_symlink() and "<svg" in target.read_text()


def test_a_page_that_cannot_be_encoded_leaves_the_old_file_intact(tmp_path, observed):
    out = tmp_path / os.fsdecode(b"obs-\xff")  # a name that is not UTF-8 reaches the page's title
    out.mkdir()
    (out / "observe.json").write_text(json.dumps(observed))
    old = tmp_path / "page.html"
    old.write_text("old page")
    with pytest.raises(ReportInputError, match="cannot be encoded"):
        write_report(out, old)
    assert old.read_text() == "old page"


def test_a_lone_surrogate_in_a_label_is_refused_naming_the_field(tmp_path, observed):
    doc = json.loads(json.dumps(observed))
    doc["report"]["sites"][1]["label"] = "\ud800"
    with pytest.raises(ReportInputError, match=r"field report\.sites\[1\]\.label must be"):
        build_report(write_observe(tmp_path, doc))


def test_a_summary_linking_outside_the_directory_is_refused_and_not_embedded(tmp_path, observed):
    out = write_observe(tmp_path, observed)
    secret = tmp_path / "private.txt"
    secret.write_text("PRIVATE-CONTENT")
    (out / "other.json").symlink_to(secret)
    page = build_report(out)
    assert "PRIVATE-CONTENT" not in page
    doc = out / "observe.json"
    os.replace(doc, tmp_path / "observe.json")
    doc.symlink_to(tmp_path / "observe.json")
    with pytest.raises(ReportInputError, match="holds no pydepth output"):
        build_report(out)


def test_a_fifo_among_the_documents_does_not_hang_the_report(tmp_path, observed):
    out = write_observe(tmp_path, observed)
    os.mkfifo(out / "a-first.json")
    assert "<svg" in build_report(out)
    train = tmp_path / "train"
    train.mkdir()
    os.mkfifo(train / "train.jsonl")
    with pytest.raises(ReportInputError, match="holds no pydepth output"):
        build_report(train)


MALFORMED = [
    ("report.sites[0].label", lambda d: d["report"]["sites"][0].pop("label")),
    ("report.sites[1].activation_ratio", lambda d: d["report"]["sites"][1].update(activation_ratio="big")),
    ("report.sites[2].adjoint_ratio", lambda d: d["report"]["sites"][2].update(adjoint_ratio=float("nan"))),
    ("report.sites[0].label", lambda d: d["report"]["sites"][0].update(label="x" * 100_000)),
    ("report.sites", lambda d: d["report"].update(sites=d["report"]["sites"] * 2000)),
    ("config.heads", lambda d: d.update(config={**d["config"], "heads": "2"})),
]


@pytest.mark.parametrize("field,edit", MALFORMED, ids=[f"{f}-{i}" for i, (f, _) in enumerate(MALFORMED)])
def test_a_malformed_observe_document_is_refused_naming_file_and_field(tmp_path, observed, field, edit):
    doc = json.loads(json.dumps(observed))
    edit(doc)
    out = write_observe(tmp_path, doc)
    with pytest.raises(ReportInputError, match=r"observe\.json: field " + re.escape(field) + " "):
        build_report(out)


def test_a_mathtext_label_is_drawn_as_plain_text(tmp_path, observed):
    doc = json.loads(json.dumps(observed))
    doc["report"]["sites"][1]["label"] = "$" + "{" * 60 + "x" + "}" * 60 + "$"
    assert "<svg" in build_report(write_observe(tmp_path, doc))


def test_malformed_training_logs_are_refused_naming_line_and_field(tmp_path):
    train = tmp_path / "train"
    train.mkdir()
    (train / "train.jsonl").write_text(json.dumps({"step": 1, "loss": "low"}) + "\n" + json.dumps({"step": 2}) + "\n")
    with pytest.raises(ReportInputError, match=r"train\.jsonl: field line 1: loss must be a finite number"):
        build_report(train)
    (train / "train.jsonl").write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    (train / "health.jsonl").write_text(json.dumps({"step": 0, "loss": 1.0, "report": {"sites": "none"}}) + "\n")
    with pytest.raises(ReportInputError, match=r"health\.jsonl: field line 1: report\.sites must be"):
        build_report(train)


def test_a_non_utf8_summary_is_a_typed_refusal(tmp_path):
    pytest.importorskip("pyarrow")
    store = tmp_path / "dc"
    assert main(["sweep", "--depths", "1", "--widths", "16", "--seeds", "0", "--observe-at", "0", "--workers", "1",
                 "--quiet", "--out", str(store)]) == 0
    (store / "_summary.txt").write_bytes(b"depth \xff\xfe\n")
    with pytest.raises(ReportInputError, match=r"summary\.txt: the summary is not UTF-8"):
        build_report(store)
    shutil.rmtree(store)
    assert not pathlib.Path(store).exists()
