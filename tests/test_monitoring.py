# SPDX-License-Identifier: MIT
"""pydepth.monitoring: the metric names and sinks both bridges log through import no framework,
and a TensorBoard sink writes through the tensorboard package alone."""
import json
import subprocess
import sys

import pytest

from pydepth import ArgumentTypeError, SinkDependencyError
from pydepth.monitoring import JsonLinesSink, TensorBoardSink, WandbSink, as_sinks, metric_table

_BLOCKED = (
    "import sys\n"
    "for name in ('torch', 'jax', 'flax', 'equinox', 'transformers', 'lightning'):\n"
    "    sys.modules[name] = None\n"
    "import pydepth.monitoring as m\n"
    "live = [k for k, v in sys.modules.items() if v is not None and k.split('.')[0] in ('torch', 'jax')]\n"
    "print(len(m.metric_table()), sorted(live))\n"
)


def test_the_monitoring_module_imports_with_torch_and_jax_blocked():
    out = subprocess.run([sys.executable, "-P", "-c", _BLOCKED], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    count, loaded = out.stdout.split(" ", 1)
    assert int(count) == len(metric_table())
    assert loaded.strip() == "[]"


def test_a_tensorboard_sink_writes_scalars_through_the_tensorboard_package_alone(tmp_path):
    pytest.importorskip("tensorboard", reason="TensorBoard logging needs tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.summary import Writer
    writer = Writer(str(tmp_path))
    sink = TensorBoardSink(writer)
    sink.write({"residual/activation_ratio_max": 1.5}, 7)
    sink.write({"residual/activation_ratio_max": 2.5}, 9)
    writer.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    tag = "residual/activation_ratio_max"
    values = [(e.step, float(e.tensor_proto.float_val[0])) for e in acc.Tensors(tag)]
    assert values == [(7, 1.5), (9, 2.5)]


def test_a_sink_without_write_or_call_is_refused_by_name():
    with pytest.raises(ArgumentTypeError, match="int"):
        as_sinks([3])


def test_a_missing_logger_is_a_typed_dependency_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(SinkDependencyError, match="wandb"):
        WandbSink().write({"a": 1.0}, 1)


def test_json_lines_name_non_finite_values_as_strings(tmp_path):
    path = tmp_path / "m.jsonl"
    sink = JsonLinesSink(path)
    sink.write({"a": float("inf"), "b": 0.5}, 3)
    sink.close()
    assert json.loads(path.read_text()) == {"step": 3, "a": "inf", "b": 0.5}
