# SPDX-License-Identifier: MIT
"""A run directory belongs to one run: locked while a run writes it, a fresh run refused where
another run's logs or checkpoints are (unless resumed, or ``overwrite`` moves the old run aside
to a sibling directory; nothing is deleted)."""
from __future__ import annotations

import contextlib
import os
import pathlib
import time
from typing import Iterator, List, Set

from .._files.lock import LOCK_FILE, holding
from ..errors import RunDirectoryError

__all__ = ["RUN_FILES", "run_files", "claimed"]

#: What marks a directory as holding a run: its logs and its checkpoints.
RUN_FILES = ("train.jsonl", "health.jsonl", "step-*.safetensors")


def run_files(directory: pathlib.Path) -> List[str]:
    """The names of the run files in directory (sorted), links included."""
    found: Set[str] = set()
    for pattern in RUN_FILES:
        found.update(p.name for p in directory.glob(pattern))
    return sorted(found)


def _aside(directory: pathlib.Path) -> pathlib.Path:
    """A new sibling name for an old run: ``NAME.old-YYYYmmddTHHMMSS`` (numbered when taken)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for n in range(1000):
        candidate = directory.with_name(f"{directory.name}.old-{stamp}" + (f"-{n}" if n else ""))
        if not os.path.lexists(candidate):
            return candidate
    raise RunDirectoryError(f"{directory}: no free sibling name to move the old run to")


@contextlib.contextmanager
def claimed(directory: pathlib.Path, *, resumed: bool, overwrite: bool) -> Iterator[pathlib.Path]:
    """Creates and locks directory for one run. A fresh run into a directory holding a run is
    refused (RunDirectoryError naming its files) unless ``overwrite``, which renames the old
    directory to a sibling and starts from an empty one; yields the directory to write."""
    directory.mkdir(parents=True, exist_ok=True)
    with holding(directory, "pydepth train"):
        found = [] if resumed else run_files(directory)
        if not found:
            yield directory
            return
        if not overwrite:
            raise RunDirectoryError(f"{directory} holds another run ({', '.join(found[:4])}); resume it, "
                                    "choose another directory, or overwrite it (its old run is moved aside)")
        aside = _aside(directory)
        os.rename(directory, aside)
        with contextlib.suppress(OSError):
            os.unlink(aside / LOCK_FILE)  # the lock moved with the old run; this run re-takes it below
    directory.mkdir(parents=True)
    with holding(directory, "pydepth train"):
        yield directory
