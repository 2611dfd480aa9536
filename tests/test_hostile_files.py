# SPDX-License-Identifier: MIT
"""Files pydepth reads, made hostile: FIFOs, devices, directories, sparse giants, crafted
checkpoint headers, undecodable text. Each is refused typed, naming the file, before it is
read whole; a child process with a timeout keeps a regression from hanging the suite."""
import json
import os
import pathlib
import struct
import subprocess
import sys
import textwrap

import pytest
from conftest import need_extra

from pydepth import DecoderConfig, DecoderModel, SplitMix64, checkpoint
from pydepth.errors import InputFileError, PydepthError
from pydepth._files import reading
from pydepth.optim import AdamW

CFG = DecoderConfig(40, 8, 2, 16, 2, 6)


def isolated(code, *args, timeout=30):
    """Runs code in a child; it prints its peak resident memory (MiB, VmHWM: getrusage would
    count the forking parent's) as the last line."""
    tail = ("\nhwm = [line for line in open('/proc/self/status') if line.startswith('VmHWM')]\n"
            "print('PEAK_MIB', int(hwm[0].split()[1]) // 1024 if hwm else 0)\n")
    proc = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(code) + tail, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    peak = int(out.split("PEAK_MIB")[-1].split()[0]) if "PEAK_MIB" in out else 1 << 30
    return proc.returncode, out, peak


LOAD = """
    import sys
    from pydepth import checkpoint, PydepthError
    try:
        checkpoint.load(sys.argv[1])
        print("LOADED")
    except PydepthError as err:
        print("REFUSED", type(err).__name__, err)
"""


@pytest.fixture
def saved(tmp_path):
    model = DecoderModel(CFG, SplitMix64(1))
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, model, optimizer=AdamW(model.parameters), rng=SplitMix64(2), step=0)
    return path


def header_of(path):
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def write_raw(path, header, data=b""):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_a_64_gib_sparse_checkpoint_with_a_valid_header_is_refused_without_reading_its_data(saved, tmp_path):
    header, _ = header_of(saved)
    giant = tmp_path / "giant.safetensors"
    write_raw(giant, {"__metadata__": header["__metadata__"],
                      "big": {"dtype": "F64", "shape": [1 << 33], "data_offsets": [0, 1 << 36]}})
    os.truncate(giant, giant.stat().st_size + (1 << 36))
    rc, out, peak = isolated(LOAD, giant)
    assert rc == 0 and "REFUSED CheckpointMismatchError" in out and "holds 1" in out, out
    assert peak < 500, out


def test_a_header_of_100000_zero_size_entries_is_refused_by_what_its_config_needs(saved, tmp_path):
    header, data = header_of(saved)
    crafted = dict(header)
    crafted.update({f"z{i}": {"dtype": "F64", "shape": [0], "data_offsets": [0, 0]} for i in range(100_000)})
    path = tmp_path / "many.safetensors"
    write_raw(path, crafted, data)
    rc, out, peak = isolated(LOAD, path)
    assert rc == 0 and "REFUSED CheckpointFormatError" in out and "config needs" in out, out
    assert peak < 500, out


def test_entries_before_the_metadata_are_bounded_too(saved, tmp_path):
    header, data = header_of(saved)
    crafted = {f"z{i}": {"dtype": "F64", "shape": [0], "data_offsets": [0, 0]} for i in range(10_000)}
    crafted.update(header)
    path = tmp_path / "late-metadata.safetensors"
    write_raw(path, crafted, data)
    with pytest.raises(checkpoint.CheckpointFormatError, match="may precede __metadata__"):
        checkpoint.load(path)


SAVE = """
    import sys
    from pydepth import DecoderConfig, DecoderModel, SplitMix64, checkpoint
    from pydepth.optim import AdamW
    model = DecoderModel(DecoderConfig(40, 8, 2, 16, 2, 6), SplitMix64(1))
    checkpoint.save(sys.argv[1], model, optimizer=AdamW(model.parameters), rng=SplitMix64(2), step=0,
                    extra={"b": 1, "a": [2, 3]})
"""


def test_equal_states_saved_in_separate_processes_are_byte_identical(tmp_path):
    paths = [tmp_path / f"p{i}.safetensors" for i in range(4)]
    for path in paths:
        rc, out, _ = isolated(SAVE, path)
        assert rc == 0, out
    blobs = {path.read_bytes() for path in paths}
    assert len(blobs) == 1


SPECIAL = [("a FIFO", lambda p: os.mkfifo(p)), ("a directory", lambda p: p.mkdir())]


@pytest.mark.parametrize("what,make", SPECIAL, ids=[w for w, _ in SPECIAL])
@pytest.mark.parametrize("kind", ["training text", "configuration", "sweep spec", "report input"])
def test_the_reader_refuses_special_files_naming_them_without_waiting(tmp_path, what, make, kind):
    path = tmp_path / "input"
    make(path)
    with pytest.raises(InputFileError, match=f"{what}; the {kind} must be a regular file") as info:
        reading.read_bytes(path, kind)
    assert str(path) in str(info.value)


def test_a_character_device_is_refused_before_a_byte_is_read():
    with pytest.raises(InputFileError, match="/dev/zero is a character device"):
        reading.read_text("/dev/zero", "configuration")


def test_a_file_over_its_kinds_cap_is_refused_from_its_size(tmp_path):
    path = tmp_path / "sparse.json"
    with open(path, "wb") as fh:
        fh.truncate(reading.CAPS["configuration"] + 1)
    with pytest.raises(InputFileError, match=r"more than the 1048576-byte limit for a configuration"):
        reading.read_json(path, "configuration")


def test_undecodable_text_is_refused_naming_the_file_and_byte(tmp_path):
    path = tmp_path / "summary.txt"
    path.write_bytes(b"ok\n\xff\xfe")
    with pytest.raises(InputFileError, match=r"summary.txt: the summary is not UTF-8 text \(byte 3"):
        reading.read_text(path, "summary")
    assert issubclass(InputFileError, PydepthError)


def test_the_docs_state_the_cap_of_every_kind_of_file():
    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    for kind, cap in reading.CAPS.items():
        shown = "none" if kind == "checkpoint" else f"{cap >> 20} MiB"
        assert f"| {kind} | {shown} |" in text, kind


def test_a_figure_replaces_a_link_planted_under_its_name_and_leaves_the_link_target_alone(tmp_path):
    need_extra("plot")
    from pydepth.plots.style import pyplot, save_figure
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    out = tmp_path / "plots"
    out.mkdir()
    (out / "fig.png").symlink_to(secret)
    fig = pyplot().figure()
    save_figure(fig, out / "fig", formats=("png", "svg"))
    assert secret.read_text() == "private"
    assert not (out / "fig.png").is_symlink() and (out / "fig.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "fig.svg").read_text().lstrip().startswith("<?xml")
