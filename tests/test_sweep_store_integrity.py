# SPDX-License-Identifier: MIT
"""A sweep store that notices damage: flipped bytes, a part copied under another name, a row
deleted from a part, a crafted spec file — each refused by resume, reads and --rerun with a
typed error naming the part, and recomputed only when asked."""
import importlib
import json
import os
import shutil
import subprocess
import sys

import pytest

pa = pytest.importorskip("pyarrow", reason="the sweep store needs pyarrow (the 'sweep' extra)")
import pyarrow.parquet as pq  # noqa: E402

from pydepth.sweep import (DamagedPartError, SweepSpec, SweepStoreError, read_table,  # noqa: E402
                           rerun_row, run)
from pydepth.sweep.store import part_files  # noqa: E402

SPEC = SweepSpec(depths=[1, 2], widths=[4], seeds=[0, 1], policies=["scaled"], sequence_length=4)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("store") / "ref"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(importlib.import_module("pydepth.sweep.run"), "MIN_TASK_SECONDS", 0.0)  # one part per cell
        run(SPEC, out=out, scheduler="serial", progress=False)
    assert len(part_files(out)) >= 2, "the damage tests need a store of several parts"
    return out


@pytest.fixture
def store(reference, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    return out


def flip_bytes(path, n=64):
    data = bytearray(path.read_bytes())
    mid = len(data) // 3
    for i in range(mid, mid + n):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def delete_a_row(path):
    table = pq.read_table(path)
    pq.write_table(table.slice(1), path)  # a valid Parquet file, one row short


def test_flipped_bytes_in_a_part_are_refused_by_resume_reading_and_rerun_naming_it(store):
    part = part_files(store)[0]
    flip_bytes(part)
    other_row = pq.read_table(part_files(store)[1]).column("row_id")[0].as_py()
    for action in (lambda: run(SPEC, out=store, scheduler="serial", progress=False),
                   lambda: read_table(store), lambda: rerun_row(store, other_row)):
        with pytest.raises(DamagedPartError, match=part.name) as info:
            action()
        assert info.value.part == str(part)


def test_a_part_copied_under_another_name_is_refused_as_a_duplicate(store):
    part = part_files(store)[0]
    shutil.copy(part, part.with_name("part-0000000000000000.parquet"))
    with pytest.raises(DamagedPartError, match=r"part-0000000000000000\.parquet: it repeats cells stored in"):
        run(SPEC, out=store, scheduler="serial", progress=False)
    with pytest.raises(DamagedPartError, match="duplicated part"):
        read_table(store)


def test_a_part_missing_a_row_is_refused_and_recomputed_when_asked(store, reference):
    part = part_files(store)[-1]
    delete_a_row(part)
    with pytest.raises(DamagedPartError, match=part.name):
        run(SPEC, out=store, scheduler="serial", progress=False)
    result = run(SPEC, out=store, scheduler="serial", progress=False, recompute_damaged=True)
    assert result.cells_run > 0
    assert (store / "_damaged").is_dir() and len(list((store / "_damaged").iterdir())) == 1
    fixed, ref = read_table(store), read_table(reference)
    assert fixed.drop(["wall_time_s"]).equals(ref.drop(["wall_time_s"]))


def test_parts_are_written_with_page_checksums_and_recorded_in_the_manifest(reference):
    manifest = json.loads((reference / "_manifest.json").read_text())
    assert sorted(manifest["parts"]) == [p.name for p in part_files(reference)]
    part = part_files(reference)[0]
    assert manifest["parts"][part.name]["rows"] == pq.ParquetFile(part).metadata.num_rows
    pq.read_table(part, page_checksum_verification=True)


def test_an_unrecorded_part_with_a_flipped_data_byte_fails_its_page_checksum(store):
    part = part_files(store)[0]
    manifest = json.loads((store / "_manifest.json").read_text())
    del manifest["parts"][part.name]  # no hash to compare with: the page checksums must notice
    (store / "_manifest.json").write_text(json.dumps(manifest))
    chunk = pq.ParquetFile(part).metadata.row_group(0).column(0)
    data = bytearray(part.read_bytes())
    data[chunk.dictionary_page_offset + chunk.total_compressed_size - 1] ^= 0x01  # last byte of its last page

    part.write_bytes(bytes(data))
    with pytest.raises(DamagedPartError, match=part.name):
        read_table(store)


def test_the_cli_refuses_a_damaged_store_with_one_line_and_recomputes_with_the_flag(store):
    flip_bytes(part_files(store)[0])
    env = dict(os.environ, PYDEPTH_NUM_THREADS="1")
    args = [sys.executable, "-m", "pydepth", "sweep", "--depths", "1,2", "--widths", "4", "--seeds", "0,1",
            "--policies", "scaled", "--sequence-length", "4", "--scheduler", "serial", "--quiet", "--out", str(store)]
    refused = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=store.parent, env=env)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr and "--recompute-damaged" in refused.stderr
    fixed = subprocess.run([*args, "--recompute-damaged"], capture_output=True, text=True, timeout=120,
                           cwd=store.parent, env=env)
    assert fixed.returncode == 0, fixed.stderr


def test_a_spec_file_nested_a_hundred_thousand_deep_is_a_store_error(store):
    (store / "_sweep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SweepStoreError, match="too deeply"):
        read_table(store)
