# SPDX-License-Identifier: MIT
"""A sweep store belongs to one sweep: a second sweep into it is refused while the first holds
its lock, torn temporaries of a killed writer are removed on resume, a full disk is a typed
error naming the part, and a directory or FIFO under a part's name is damage, not a crash."""
import errno
import os

import pytest

pytest.importorskip("pyarrow", reason="the sweep store needs pyarrow (the 'sweep' extra)")

from pydepth.errors import PydepthError, RunDirectoryError
from pydepth.sweep import DamagedPartError, SweepSpec, SweepStoreError, read_table, run
from pydepth.sweep.store import claimed, part_files
from pydepth._files.lock import LOCK_FILE

SPEC = SweepSpec(depths=[1], widths=[4], seeds=[0, 1], policies=["scaled"], sequence_length=4)


def sweep(out, **kw):
    return run(SPEC, out=out, scheduler="serial", progress=False, **kw)


def test_a_second_sweep_into_a_store_held_by_a_live_sweep_is_refused_and_writes_nothing(tmp_path):
    out = tmp_path / "store"
    with claimed(out):
        with pytest.raises(RunDirectoryError, match="pydepth sweep"):
            sweep(out)
        assert sorted(os.listdir(out)) == [LOCK_FILE]
    sweep(out)
    assert not (out / LOCK_FILE).exists() and len(part_files(out)) >= 1


def test_torn_temporaries_of_a_killed_sweep_are_removed_on_resume(tmp_path):
    out = tmp_path / "store"
    sweep(out)
    torn = [out / ".part-0123456789abcdef.parquet.4242.tmp", out / f".pydepth-{os.getpid()}-abc.tmp",
            out / ".manifest.json.4242.tmp"]
    for path in torn:
        path.write_bytes(b"PAR1 torn")
    sweep(out)
    assert not any(path.exists() for path in torn)


def test_a_full_disk_while_writing_a_part_is_a_typed_error_naming_the_file(tmp_path, monkeypatch):
    real = os.fsync

    def full(fd):
        if ".pydepth-" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)
    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "store"
    with pytest.raises(SweepStoreError, match=r"No space left on device") as info:
        sweep(out)
    assert str(out) in str(info.value) and isinstance(info.value, PydepthError)
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]


@pytest.mark.parametrize("make", [os.mkdir, os.mkfifo], ids=["directory", "fifo"])
def test_a_special_file_named_like_a_part_is_reported_as_damage_naming_it(tmp_path, make):
    out = tmp_path / "store"
    sweep(out)
    bad = out / "part-0123456789abcdef.parquet"
    make(bad)
    for action in (lambda: sweep(out), lambda: read_table(out)):
        with pytest.raises(DamagedPartError, match=r"part-0123456789abcdef\.parquet"):
            action()
    sweep(out, recompute_damaged=True)
    assert not os.path.lexists(bad) and read_table(out).num_rows > 0


def test_a_part_that_links_outside_the_store_is_damage_not_read(tmp_path):
    out = tmp_path / "store"
    sweep(out)
    part = part_files(out)[0]
    outside = tmp_path / "elsewhere.parquet"
    os.replace(part, outside)  # the very bytes the manifest lists, now outside the store
    os.symlink(outside, part)
    with pytest.raises(DamagedPartError, match=part.name):
        read_table(out)
    assert outside.exists()
