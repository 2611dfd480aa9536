# SPDX-License-Identifier: MIT
"""checkpoint.save as a file-system citizen: no orphaned temporaries, the umask's or the
replaced file's mode, symlinks written through, typed refusals that keep the old file, a
durable directory entry, and byte-identical files for equal states."""
import errno
import hashlib
import os
import stat
import subprocess
import sys
import tempfile
import time

import pytest

import pydepth
from pydepth import DecoderConfig, DecoderModel, SplitMix64, checkpoint
from pydepth.optim import AdamW

CFG = DecoderConfig(40, 8, 2, 16, 2, 6)


@pytest.fixture
def model():
    return DecoderModel(CFG, SplitMix64(1))


def dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_save_removes_temporaries_of_writers_that_died(tmp_path, model):
    orphan = tmp_path / f".pydepth-{dead_pid()}-abc123.tmp"
    orphan.write_bytes(b"x" * 1000)
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    live = tmp_path / f".pydepth-{os.getpid()}-def456.tmp"  # a writer still running: kept
    live.write_bytes(b"y")
    os.utime(live, (old, old))
    checkpoint.save(tmp_path / "ck.safetensors", model)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ck.safetensors", live.name])


def test_a_new_file_gets_the_umask_mode_and_a_replaced_file_keeps_its_mode(tmp_path, model):
    old = os.umask(0o022)
    try:
        path = tmp_path / "ck.safetensors"
        checkpoint.save(path, model)
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        os.chmod(path, 0o640)
        checkpoint.save(path, model, step=3)
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_saving_through_a_symlink_writes_its_target(tmp_path, model):
    target = tmp_path / "real.safetensors"
    checkpoint.save(target, model, step=1)
    link = tmp_path / "latest.safetensors"
    link.symlink_to(target)
    checkpoint.save(link, model, step=2)
    assert link.is_symlink()
    assert checkpoint.load(target).step == 2


def test_an_empty_path_or_a_directory_is_refused_and_nothing_is_written(tmp_path, model, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(pydepth.CheckpointFileError, match="empty"):
        checkpoint.save("", model)
    with pytest.raises(pydepth.CheckpointFileError, match="directory"):
        checkpoint.save(tmp_path, model)
    assert list(tmp_path.iterdir()) == []
    assert not [p for p in tmp_path.parent.iterdir() if p.name.startswith(".pydepth-")]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_full_or_read_only_disk_is_a_typed_error_that_keeps_the_old_file(tmp_path, model, monkeypatch, code):
    path = tmp_path / "ck.safetensors"
    checkpoint.save(path, model, step=1)
    before = path.read_bytes()
    real = os.fsync

    def failing(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(code, os.strerror(code))
        return real(fd)
    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(pydepth.CheckpointFileError, match=os.strerror(code)) as info:
        checkpoint.save(path, model, step=2)
    assert info.value.errno == code and isinstance(info.value, OSError)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.safetensors"]


def test_a_directory_that_refuses_the_temporary_is_a_typed_error(tmp_path, model, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(pydepth.CheckpointFileError, match="not written"):
        checkpoint.save(tmp_path / "ck.safetensors", model)


def test_the_directory_is_fsynced_after_the_rename(tmp_path, model, monkeypatch):
    synced = []
    real = os.fsync

    def spy(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        return real(fd)
    monkeypatch.setattr(os, "fsync", spy)
    checkpoint.save(tmp_path / "ck.safetensors", model)
    assert synced == [False, True]


def test_equal_states_give_byte_identical_files(tmp_path, model):
    opt = AdamW(model.parameters)
    digests = set()
    for i in range(8):
        path = tmp_path / f"ck{i}.safetensors"
        checkpoint.save(path, model, optimizer=opt, rng=SplitMix64(3), step=4, extra={"b": 1, "a": [2, 3]})
        digests.add(hashlib.sha256(path.read_bytes()).hexdigest())
    assert len(digests) == 1
