# SPDX-License-Identifier: MIT
"""The chapter demo, its schema, the published tables and the command line."""
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

import pydepth
from pydepth import DecoderConfig, DepthScalePolicy
from pydepth import cli
from pydepth.chapter import demo
from conftest import need_extra

HERE = pathlib.Path(__file__).parent
SCHEMA = json.loads((HERE / "demo_schema.json").read_text())
ROOT = HERE.parent


@pytest.fixture(scope="module")
def doc():
    return demo.demo_trace()


# ---------------------------------------------------------------- a small JSON Schema checker

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def _is_type(value, name):
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def validate(value, schema, root=SCHEMA, path="$"):
    """Raises AssertionError naming the path of the first violation. Supports the keywords
    demo_schema.json uses: $ref, type, required, properties, additionalProperties, items,
    minItems, maxItems, enum, const, minimum, maximum, exclusiveMinimum, pattern."""
    if "$ref" in schema:
        node = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return validate(value, node, root, path)
    if "type" in schema:
        assert _is_type(value, schema["type"]), f"{path}: {value!r} is not {schema['type']}"
    if "const" in schema:
        assert value == schema["const"] and type(value) is type(schema["const"]), f"{path}: {value!r} != const"
    if "enum" in schema:
        assert value in schema["enum"], f"{path}: {value!r} not in {schema['enum']}"
    if "minimum" in schema:
        assert value >= schema["minimum"], f"{path}: {value!r} < minimum"
    if "maximum" in schema:
        assert value <= schema["maximum"], f"{path}: {value!r} > maximum"
    if "exclusiveMinimum" in schema:
        assert value > schema["exclusiveMinimum"], f"{path}: {value!r} <= exclusiveMinimum"
    if "pattern" in schema:
        assert re.search(schema["pattern"], value), f"{path}: {value!r} does not match {schema['pattern']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, f"{path}: missing {key}"
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                validate(item, props[key], root, f"{path}.{key}")
            else:
                assert schema.get("additionalProperties", True) is not False, f"{path}: unexpected key {key}"
    if isinstance(value, list):
        assert len(value) >= schema.get("minItems", 0), f"{path}: too few items"
        assert len(value) <= schema.get("maxItems", math.inf), f"{path}: too many items"
        if "items" in schema:
            for i, item in enumerate(value):
                validate(item, schema["items"], root, f"{path}[{i}]")


def test_demo_validates_against_schema(doc):
    validate(json.loads(json.dumps(doc)), SCHEMA)
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.validate(json.loads(json.dumps(doc)), SCHEMA)


def test_schema_checker_rejects_broken_documents(doc):
    broken = json.loads(json.dumps(doc))
    broken["fixtures"][2]["initialized"]["sites"][4]["adjoint_status"] = "fine"
    with pytest.raises(AssertionError, match="adjoint_status"):
        validate(broken, SCHEMA)
    broken = json.loads(json.dumps(doc))
    del broken["fixtures"][0]["same_base_unscaled_control"]["within_band"]
    with pytest.raises(AssertionError, match="within_band"):
        validate(broken, SCHEMA)
    broken = json.loads(json.dumps(doc))
    broken["laptop_plan"]["symbolic_only"] = False
    with pytest.raises(AssertionError, match="symbolic_only"):
        validate(broken, SCHEMA)


# ---------------------------------------------------------------- published tables


def r6(x):
    return round(x, 6)


def test_every_published_number(doc, published_tables):
    pub = published_tables
    assert doc["seed"] == pub["seed"] and doc["tokens"] == pub["tokens"] and doc["targets"] == pub["targets"]
    assert doc["band"] == pub["band"]
    assert [f["id"] for f in doc["fixtures"]] == [f["id"] for f in pub["fixtures"]]
    for fx, want in zip(doc["fixtures"], pub["fixtures"]):
        assert fx["title"] == want["title"]
        assert (fx["layers"], fx["width"], fx["heads"], fx["ff_width"], fx["vocabulary"], fx["max_positions"]) == (
            want["layers"], want["model_width"], want["heads"], want["feed_forward_width"],
            want["vocabulary_size"], want["max_positions"])
        assert fx["parameters"] == want["parameter_count"]
        assert fx["parameters"] == DecoderConfig(fx["vocabulary"], fx["width"], fx["heads"], fx["ff_width"],
                                                 fx["layers"], fx["max_positions"]).parameter_count
        assert r6(fx["factor"]) == want["factor"]
        ini = fx["initialized"]
        assert r6(ini["input_activation_normalizer"]) == want["input_activation_normalizer"]
        assert r6(ini["terminal_adjoint_normalizer"]) == want["terminal_adjoint_normalizer"]
        assert len(ini["sites"]) == len(want["sites"]) == fx["residual_sites"] == 2 * fx["layers"] + 1
        for site, w in zip(ini["sites"], want["sites"]):
            assert site["site"] == w["site"]
            for key in ("activation_rms", "activation_ratio", "adjoint_rms", "adjoint_ratio"):
                assert r6(site[key]) == w[key], (fx["id"], site["site"], key)
            assert site["activation_status"] == site["adjoint_status"] == "within"
        assert ini["within_band"] is True
        ctl, wctl = fx["same_base_unscaled_control"], want["same_base_unscaled_control"]
        for key in ("input_activation_normalizer", "terminal_adjoint_normalizer", "activation_ratio_min",
                    "activation_ratio_max", "adjoint_ratio_min", "adjoint_ratio_max"):
            assert r6(ctl[key]) == wctl[key], (fx["id"], key)
        assert ctl["within_band"] is wctl["within_band"]
    syn = pub["synthetic_classifiers"]
    assert set(doc["synthetic_classifiers"]) == set(syn)
    for name, want in syn.items():
        assert doc["synthetic_classifiers"][name]["ratios"] == want["ratios"]
        assert doc["synthetic_classifiers"][name]["classes"] == want["classes"]
    w, wp = doc["worked_values"], pub["worked_values"]
    for depth in map(str, wp["depths"]):
        assert [r6(v) for v in w["selected"][depth]] == wp["selected_rounded"][depth]
        assert w["xavier_4x4"][depth]["half_bound"] == wp["xavier_4x4"][depth]["half_bound"]
        assert w["xavier_4x4"][depth]["variance"] == wp["xavier_4x4"][depth]["variance"]
    assert w["query_vector_unchanged"] == wp["query_vector_unchanged"]
    lp, wlp = doc["laptop_plan"], pub["laptop_plan"]
    for key, value in wlp.items():
        assert lp[key] == value, key


def test_published_max_ratio_tables_are_the_site_maxima(doc):
    for fx in doc["fixtures"]:
        for variant in ("initialized", "same_base_unscaled_control"):
            rep = fx[variant]
            assert rep["activation_ratio_max"] == max(s["activation_ratio"] for s in rep["sites"])
            assert rep["adjoint_ratio_min"] == min(s["adjoint_ratio"] for s in rep["sites"])
        if fx["layers"] > 1:  # the chapter's observation: deeper fixtures lower the maxima
            assert fx["initialized"]["activation_ratio_max"] < fx["same_base_unscaled_control"]["activation_ratio_max"]
            assert fx["initialized"]["adjoint_ratio_max"] < fx["same_base_unscaled_control"]["adjoint_ratio_max"]
        else:
            assert fx["initialized"]["sites"] == fx["same_base_unscaled_control"]["sites"]


def test_fixture_metadata(doc):
    for fx in doc["fixtures"]:
        cfg = DecoderConfig(fx["vocabulary"], fx["width"], fx["heads"], fx["ff_width"], fx["layers"],
                            fx["max_positions"])
        assert fx["budget"]["max_parameters"] >= cfg.parameter_count
        assert fx["budget"]["max_positions"] >= cfg.max_positions
        assert fx["factor"] == DepthScalePolicy(fx["layers"]).factor
        assert fx["initial_rng_state"] == str(demo.SEED)
        rng = pydepth.SplitMix64(demo.SEED)
        pydepth.DecoderModel(cfg, rng)
        assert fx["final_rng_state"] == str(rng.state)
        assert fx["transformed_tensors"] == (0 if fx["layers"] == 1 else 2 * fx["layers"])
        assert len(fx["selected_names"]) == 2 * fx["layers"]
        assert fx["unselected_tensors_unchanged"] == fx["parameter_tensors"] - 2 * fx["layers"] == 7 * fx["layers"] + 2
    # each profile's budget admits its largest fixture exactly
    assert {(f["profile"], f["parameters"]) for f in doc["fixtures"]} >= {("reference-ci", 1188), ("cpu-bridge", 8304)}


def test_laptop_plan_allocates_nothing_and_counts():
    plan = demo.laptop_plan()
    assert plan["parameter_count"] == DecoderConfig(16384, 512, 8, 1536, 8, 512, kv_heads=2).parameter_count == 32514560
    assert plan["factor_value"] == 1.0 / math.sqrt(8.0)
    assert plan["symbolic_only"] is True


def test_demo_runs_well_under_a_second():
    demo.demo_trace()
    t0 = time.perf_counter()
    demo.demo_trace()
    assert time.perf_counter() - t0 < 1.0


# ---------------------------------------------------------------- self-checks fail loudly


def test_demo_fails_when_a_fixture_leaves_the_band(monkeypatch, capsys):
    monkeypatch.setattr(pydepth.health, "HEALTH_BAND", (0.01, 5.0))
    with pytest.raises(demo.DemoCheckError, match="narrow-1: fixed initialized fixture left"):
        demo.demo_trace()
    assert cli.main(["demo"]) == 1
    assert "left the frozen health band" in capsys.readouterr().err


def test_demo_fails_when_a_transform_differs(monkeypatch):
    # select the up projection instead of the down projection: same count, wrong tensors
    monkeypatch.setattr(DepthScalePolicy, "selects", lambda self, name: bool(
        re.fullmatch(r"blocks\.[0-9]+\.(attention\.output|ffn\.up)\.weight", name)))
    with pytest.raises(demo.DemoCheckError,
                       match=r"narrow-2: selective stored-weight transform differed in blocks\.0\.ffn\.up\.weight"):
        demo.demo_trace()


# ---------------------------------------------------------------- command line


def _env():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def test_python_m_pydepth_demo(doc, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pydepth", "demo", "--format", "json"], capture_output=True, text=True,
                          cwd=tmp_path, env=_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(json.dumps(doc))


def test_demo_table(capsys, doc):
    assert cli.main(["demo", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "Narrow decoder, eight complete blocks" in out and "CPU bridge decoder, two complete blocks" in out
    assert "block.7.after_feed_forward" in out
    assert "Maximum activation RMS / input activation RMS" in out
    assert f"{doc['fixtures'][2]['same_base_unscaled_control']['activation_ratio_max']:.6f}" in out
    assert "Synthetic activation ratios" in out and "above" in out
    assert "32514560" in out


def test_plot_without_matplotlib_names_the_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    assert cli.main(["demo", "--plot", str(tmp_path / "plots")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'pydepth[plot]'" in err
    assert not (tmp_path / "plots").exists()


def test_plot_writes_png_and_svg(tmp_path, capsys):
    need_extra("plot")
    assert cli.main(["demo", "--plot", str(tmp_path)]) == 0
    for fid in ("narrow-1", "narrow-2", "narrow-8", "bridge-2"):
        for suffix in ("png", "svg"):
            path = tmp_path / f"{fid}-ratios.{suffix}"
            assert path.stat().st_size > 0
    assert (tmp_path / "narrow-8-ratios.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / "narrow-8-ratios.svg").read_bytes()[:2000]
    out = tmp_path / "observe" / "health.png"
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(DecoderConfig(266, 4, 1, 4, 2, 4).to_dict()))
    assert cli.main(["observe", "--config", str(cfg), "--seed", "4701", "--tokens", "0,99,100,101",
                     "--targets", "99,100,101,1", "--plot", str(out.parent)]) == 0
    assert out.stat().st_size > 0


def _observe(capsys, tmp_path, cfg, *extra):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg.to_dict()))
    code = cli.main(["observe", "--config", str(path), "--format", "json", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_observe_matches_demo_fixture(capsys, tmp_path, doc):
    code, out, _ = _observe(capsys, tmp_path, DecoderConfig(266, 4, 1, 4, 8, 4), "--seed", "4701",
                            "--tokens", "0,99,100,101", "--targets", "99,100,101,1")
    assert code == 0
    result = json.loads(out)
    narrow8 = doc["fixtures"][2]["initialized"]
    assert result["loss"] == narrow8["loss"]
    assert result["report"] == {k: v for k, v in narrow8.items() if k != "loss"}
    assert result["record"]["final_rng_state"] == doc["fixtures"][2]["final_rng_state"]


def test_observe_with_padding_matches_unpadded(capsys, tmp_path):
    cfg = DecoderConfig(266, 16, 2, 20, 2, 16)
    code, plain, _ = _observe(capsys, tmp_path, cfg, "--seed", "7", "--tokens", "0,99,100,101",
                              "--targets", "99,100,101,1")
    assert code == 0
    code, padded, _ = _observe(capsys, tmp_path, cfg, "--seed", "7", "--tokens", "0,99,100,101,3,3,0,5,6,7,1,1",
                               "--targets", "99,100,101,1,3,3,5,6,7,1,1,1", "--valid", "1,1,1,1,0,0,1,1,1,1,0,0",
                               "--batch-rows", "2")
    assert code == 0
    one, two = json.loads(plain)["report"], json.loads(padded)["report"]
    assert two["valid_positions"] == 8
    assert one["sites"] != two["sites"]  # the second row is observed too
    code, padded_only, _ = _observe(capsys, tmp_path, cfg, "--seed", "7", "--tokens", "0,99,100,101,3,3",
                                    "--targets", "99,100,101,1,3,3", "--valid", "1,1,1,1,0,0")
    assert code == 0
    assert json.loads(padded_only)["report"] == one


def test_observe_table_and_errors(capsys, tmp_path):
    cfg = DecoderConfig(266, 4, 1, 4, 2, 4)
    code, out, _ = _observe(capsys, tmp_path, cfg, "--seed", "1", "--tokens", "0,1,2,3", "--targets", "1,2,3,4",
                            "--format", "table")
    assert code == 0 and "block.1.after_feed_forward" in out and "factor 0.707107" in out
    code, _, err = _observe(capsys, tmp_path, cfg, "--seed", "1", "--tokens", "0,1,2,999", "--targets", "1,2,3,4")
    assert code == 1 and "999" in err
    code, _, err = _observe(capsys, tmp_path, cfg, "--seed", "1", "--tokens", "0,1,2", "--targets", "1,2,3",
                            "--batch-rows", "2")
    assert code == 1 and "2 equal rows" in err
    code, _, err = _observe(capsys, tmp_path, DecoderConfig(266, 4, 1, 4, 0, 4), "--seed", "1",
                            "--tokens", "0,1", "--targets", "1,2")
    assert code == 1 and "depth" in err
    with pytest.raises(SystemExit) as info:
        cli.main(["observe", "--config", "x.json", "--seed", "-3", "--tokens", "1", "--targets", "1"])
    assert info.value.code == 2


def test_trace_dispatch(tmp_path, reference_trace):
    fx = reference_trace["fixtures"][1]
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(fx["config"]))
    out = tmp_path / "trace.json"
    assert cli.main(["trace", "--config", str(cfg), "--seed", str(fx["seed"]), "--tokens", "0,99,100,101",
                     "--targets", "99,100,101,1", "--output", str(out)]) == 0
    ours = json.loads(out.read_text())["fixtures"][0]
    assert ours["initialized"]["site_activation_rms"] == fx["initialized"]["site_activation_rms"]
    assert ours["final_rng_state"] == fx["final_rng_state"]


def test_no_command_is_a_usage_error():
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2


def test_example_script_runs(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "ch06_depth_stable_decoder.py"),
                           "--json", "demo.json"],
                          capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "refused as expected" in proc.stdout and "pydepth-ch06-demo-v1" not in proc.stdout
    assert json.loads((tmp_path / "demo.json").read_text())["format"] == "pydepth-ch06-demo-v1"
