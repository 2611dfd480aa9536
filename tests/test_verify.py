# SPDX-License-Identifier: MIT
"""`pydepth verify`: the packaged public fixtures recomputed bit for bit, with the first
differing value named (issue 13)."""
import copy
import json
import pathlib
import subprocess
import sys

import pytest

import pydepth
from pydepth.chapter import verify as V
from pydepth.errors import ReferenceDataError

REFERENCE = pathlib.Path(__file__).parent / "reference" / "trace-public.json"


def value_count(fixture):
    """Values a fixture traces: generator states, factor and count, then every bit pattern."""
    n = len(V.SCALARS)
    for model in V.MODELS:
        t = fixture[model]
        n += sum(len(e["bits"]) for key in V.ENTRY_LISTS for e in t[key])
        n += sum(len(t[key]) for key in V.BIT_LISTS)
    return n


def flip(bits):
    return format(int(bits, 16) ^ 1, "016x")


def run_cli(*args, cwd):
    # cwd outside the source tree, so the installed package (with its data) is imported
    return subprocess.run([sys.executable, "-m", "pydepth", "verify", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_the_packaged_fixtures_are_the_public_reference_file():
    packaged = pathlib.Path(str(V.public_fixtures_path()))
    assert packaged.read_bytes() == REFERENCE.read_bytes()
    assert pathlib.Path(pydepth.__file__).parent in packaged.parents


def test_every_public_fixture_passes_and_every_value_is_compared(reference_trace):
    results = V.verify()
    assert [r.fixture_id for r in results] == [f["id"] for f in reference_trace["fixtures"]]
    for result, fixture in zip(results, reference_trace["fixtures"]):
        assert result.passed and result.first_difference is None
        assert result.checked == value_count(fixture)


def test_a_flipped_bit_is_the_first_difference_reported(reference_trace, tmp_path):
    fixture = copy.deepcopy(reference_trace["fixtures"][2])
    entry = fixture["initialized"]["forward"][9]
    original = entry["bits"][3]
    entry["bits"][3] = flip(original)
    later = fixture["same_base_unscaled_control"]["parameter_gradients"][0]
    later["bits"][5] = flip(later["bits"][5])
    result = V.verify_fixture(fixture)
    assert not result.passed and result.differing == 2
    diff = result.first_difference
    assert diff.where == f"initialized forward {entry['name']}[3]"
    assert (diff.got, diff.expected) == (original, entry["bits"][3])
    assert original in str(diff) and entry["bits"][3] in str(diff)


def test_site_rms_and_generator_state_differences_are_named(reference_trace):
    fixture = copy.deepcopy(reference_trace["fixtures"][0])
    fixture["same_base_unscaled_control"]["site_adjoint_rms"][2] = "3ff0000000000000"
    result = V.verify_fixture(fixture)
    assert result.first_difference.where == "same_base_unscaled_control site_adjoint_rms[2]"
    fixture["final_rng_state"] = "1"
    assert V.verify_fixture(fixture).first_difference.where == "final_rng_state"


def test_missing_values_and_renamed_entries_are_differences(reference_trace):
    fixture = copy.deepcopy(reference_trace["fixtures"][0])
    del fixture["initialized"]["forward"][4]["bits"][-1]
    name = fixture["initialized"]["forward"][4]["name"]
    result = V.verify_fixture(fixture)
    assert result.first_difference.where == f"initialized forward {name}"
    fixture = copy.deepcopy(reference_trace["fixtures"][0])
    fixture["initialized"]["parameters"][1]["name"] = "blocks.0.renamed"
    assert V.verify_fixture(fixture).first_difference.where == "initialized parameters entry"


@pytest.mark.parametrize("text, message", [
    ("not json", "not JSON"),
    ('{"format": "other", "fixtures": []}', "not a pydepth-reference-trace-v1"),
    ('{"format": "pydepth-reference-trace-v1", "fixtures": []}', "has no fixtures"),
])
def test_unreadable_trace_files_are_refused(tmp_path, text, message):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(ReferenceDataError, match=message):
        V.verify(path)
    with pytest.raises(ReferenceDataError, match="cannot read"):
        V.verify(tmp_path / "missing.json")


def test_a_malformed_fixture_is_refused_by_name(reference_trace):
    fixture = copy.deepcopy(reference_trace["fixtures"][1])
    fixture["config"]["heads"] = 3
    with pytest.raises(ReferenceDataError, match="narrow-2"):
        V.verify_fixture(fixture)
    del fixture["config"]
    with pytest.raises(ReferenceDataError, match="narrow-2 is malformed"):
        V.verify_fixture(fixture)


def test_cli_passes_on_the_packaged_fixtures(tmp_path):
    out = run_cli("--threads", "2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].startswith("on ") and lines[1].endswith(", 2 threads")
    assert [line.split(":")[0] for line in lines[2:5]] == ["PASS narrow-1", "PASS narrow-2",
                                                         "PASS batch-heads-2"]
    assert lines[5].startswith("verifying the chapter's published tables")
    assert [line.split(":")[0] for line in lines[6:10]] == [
        f"PASS {name} (published tables)" for name in ("narrow-1", "narrow-2", "narrow-8", "bridge-2")]
    assert lines[-1] == "all fixtures match"


def test_the_published_tables_are_checked_number_by_number_and_a_changed_one_fails(tmp_path):
    from pydepth.chapter.published import load_published, verify_published
    doc = load_published()
    assert all(r.passed and r.checked > 20 for r in verify_published())
    doc["fixtures"][3]["sites"][2]["adjoint_ratio"] += 1e-6
    path = tmp_path / "tables.json"
    path.write_text(json.dumps(doc))
    results = verify_published(path)
    assert [r.passed for r in results] == [True, True, True, False]
    assert results[3].differing == 1 and results[3].first_difference.where == "site 2 adjoint_ratio"
    (tmp_path / "broken.json").write_text("[")
    with pytest.raises(ReferenceDataError, match="cannot read published tables"):
        verify_published(tmp_path / "broken.json")


def test_cli_fails_with_the_first_differing_value(reference_trace, tmp_path):
    doc = copy.deepcopy(reference_trace)
    entry = doc["fixtures"][1]["initialized"]["site_adjoints"][1]
    original = entry["bits"][6]
    entry["bits"][6] = flip(original)
    path = tmp_path / "corrupt.json"
    path.write_text(json.dumps(doc))
    out = run_cli("--fixtures", str(path), cwd=tmp_path)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[2].startswith("PASS narrow-1") and lines[4].startswith("PASS batch-heads-2")
    assert lines[3].startswith("FAIL narrow-2: 1 of ")
    assert f"first: initialized site_adjoints site.1[6]: got {original} (" in lines[3]
    assert f"expected {entry['bits'][6]} (" in lines[3]
    assert lines[-1] == "1 of 3 fixtures differ"


def test_cli_reports_an_unreadable_file_without_a_traceback(tmp_path):
    out = run_cli("--fixtures", str(tmp_path / "missing.json"), cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.startswith("pydepth: error: cannot read reference trace") and "Traceback" not in out.stderr
