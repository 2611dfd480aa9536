# SPDX-License-Identifier: MIT
"""Crafted checkpoint files: claims bounded by what the file holds, special files, deep JSON,
foreign dtypes, oversized metadata — every refusal typed, none slower than reading the file."""
import json
import os
import struct
import subprocess
import sys
import textwrap

import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, SplitMix64, checkpoint
from pydepth.optim import AdamW

CFG = DecoderConfig(40, 8, 2, 16, 2, 6)


def raw_file(path, header, data=b""):
    """Writes a safetensors container by hand, so anything can be crafted."""
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def split(path):
    """(header dict, data bytes) of a saved file."""
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def with_meta(path, edit):
    header, data = split(path)
    meta = json.loads(header["__metadata__"]["pydepth"])
    edit(meta)
    header["__metadata__"]["pydepth"] = json.dumps(meta)
    raw_file(path, header, data)


@pytest.fixture
def saved(tmp_path):
    model = DecoderModel(CFG, SplitMix64(1))
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, model, optimizer=AdamW(model.parameters), rng=SplitMix64(2), step=0)
    return path


def isolated(code, timeout=20):
    """Runs code in a child with 4 GiB of address space and a timeout, so a regression that
    hangs or eats memory fails this test instead of the machine."""
    capped = "asan" not in os.environ.get("LD_PRELOAD", "")  # ASan's shadow alone reserves terabytes
    wrapper = (("import resource\nresource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n" if capped else "")
               + textwrap.dedent(code))
    proc = subprocess.run([sys.executable, "-P", "-c", wrapper], capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


LOAD_AND_REPORT = """
    import sys, time
    from pydepth import checkpoint, PydepthError
    t0 = time.perf_counter()
    try:
        checkpoint.load(sys.argv[1] if len(sys.argv) > 1 else {path!r})
    except PydepthError as err:
        print("REFUSED", type(err).__name__, round(time.perf_counter() - t0, 3), err)
    """


def test_a_config_claiming_a_billion_layers_is_refused_from_counts_in_under_a_second(saved):
    with_meta(saved, lambda m: (m["config"].update(layers=10**9), m.update(record=None)))
    rc, out = isolated(LOAD_AND_REPORT.format(path=str(saved)))
    assert rc == 0 and "REFUSED CheckpointMismatchError" in out, out
    assert "9000000002 parameter tensors" in out and "holds 20" in out, out
    assert float(out.split()[2]) < 1.0, out


def test_a_config_claiming_a_thousand_layers_is_refused_without_building_their_layout(saved, monkeypatch):
    with_meta(saved, lambda m: (m["config"].update(layers=1000), m.update(record=None)))

    def forbidden(self):
        raise AssertionError(f"layout of {self.layers} layers built for a file of 20 tensors")
    monkeypatch.setattr(DecoderConfig, "parameter_layout", forbidden)
    with pytest.raises(pydepth.CheckpointMismatchError, match="needs 9002 parameter tensors; the file holds 20"):
        checkpoint.load(saved)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "ck.safetensors"
    os.mkfifo(fifo)
    rc, out = isolated(LOAD_AND_REPORT.format(path=str(fifo)), timeout=20)
    assert rc == 0 and "REFUSED CheckpointFileError" in out and "a FIFO" in out, out


def test_dev_zero_is_refused_before_reading_a_byte():
    rc, out = isolated(LOAD_AND_REPORT.format(path="/dev/zero"), timeout=20)
    assert rc == 0 and "REFUSED CheckpointFileError" in out and "character device" in out, out


def test_a_directory_and_a_missing_file_are_typed_errors_that_are_still_oserrors(tmp_path):
    with pytest.raises(pydepth.CheckpointFileError, match="directory"):
        checkpoint.load(tmp_path)
    with pytest.raises(OSError, match="cannot open"):
        checkpoint.load(tmp_path / "missing.safetensors")


@pytest.mark.parametrize("where", ["header", "metadata"])
def test_json_nested_a_hundred_thousand_deep_is_a_format_error(saved, where):
    deep = "[" * 100_000 + "]" * 100_000
    header, data = split(saved)
    if where == "metadata":
        header["__metadata__"]["pydepth"] = deep
        raw_file(saved, header, data)
    else:
        text = json.dumps(header)[:-1] + ', "x": ' + deep + "}"
        saved.write_bytes(struct.pack("<Q", len(text)) + text.encode() + data)
    with pytest.raises(pydepth.CheckpointFormatError, match="too deeply"):
        checkpoint.load(saved)


def test_a_bf16_tensor_is_refused_naming_it(saved):
    header, data = split(saved)
    header["final_norm.gain"]["dtype"] = "BF16"
    header["final_norm.gain"]["shape"] = [header["final_norm.gain"]["shape"][0] * 4]
    raw_file(saved, header, data)
    with pytest.raises(pydepth.CheckpointFormatError, match=r"'final_norm\.gain' has dtype bfloat16"):
        checkpoint.load(saved)


def test_offsets_outside_the_data_are_refused(saved):
    header, data = split(saved)
    header["final_norm.gain"]["data_offsets"] = [0, 10**12]
    raw_file(saved, header, data)
    with pytest.raises(pydepth.CheckpointFormatError, match="data_offsets"):
        checkpoint.load(saved)


def test_a_hundred_megabyte_extra_is_refused_as_a_checkpoint_error(tmp_path):
    path = tmp_path / "ck.safetensors"
    with pytest.raises(pydepth.CheckpointError, match="header limit"):
        checkpoint.save(path, DecoderModel(CFG, SplitMix64(1)), extra="x" * 100_000_000)
    assert not path.exists()


def test_an_optimizer_step_of_2_to_the_70_is_refused_at_load(saved):
    with_meta(saved, lambda m: m["optimizer"].update(step=2**70))
    with pytest.raises(pydepth.CheckpointError, match="step"):
        checkpoint.load(saved)
