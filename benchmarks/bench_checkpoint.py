# SPDX-License-Identifier: MIT
"""Checkpoint save and load against the safetensors library's own calls on the same tensors.

    python benchmarks/bench_checkpoint.py [--widths 64,256] [--layers 4] [--repeat 9]

``checkpoint.save`` (metadata, the library's encoder, atomic write with fsync) is timed against
``safetensors.numpy.save_file`` of the same tensors (no fsync), and ``checkpoint.load`` (header
checks, the library's memory map, model and optimizer rebuilt and checked) against
``safetensors.numpy.load_file``. Runs are interleaved, order alternating, medians reported;
the ratio is pydepth over the library.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Callable, Dict, List

import safetensors.numpy

import pydepth
from pydepth import DecoderConfig, DecoderModel, SplitMix64, checkpoint
from pydepth.optim import AdamW


def _seconds(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="64,256")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    print(f"pydepth {pydepth.__version__}, safetensors {safetensors.__version__}")
    print(f"{'width':>6} {'MB':>7} {'save ms':>8} {'lib ms':>8} {'ratio':>6} {'load ms':>8} {'lib ms':>8} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs = os.path.join(tmp, "ours.safetensors"), os.path.join(tmp, "lib.safetensors")
        for width in (int(w) for w in args.widths.split(",")):
            med = _case(width, args.layers, args.repeat, ours, theirs)
            print(f"{width:>6} {os.path.getsize(ours) / 1e6:>7.1f} {med['save']:>8.2f} {med['libsave']:>8.2f} "
                  f"{med['save'] / med['libsave']:>6.2f} {med['load']:>8.2f} {med['libload']:>8.2f} "
                  f"{med['load'] / med['libload']:>6.2f}")


def _case(width: int, layers: int, repeat: int, ours: str, theirs: str) -> Dict[str, float]:
    """Median milliseconds of each call, interleaved with the order alternating."""
    model = DecoderModel(DecoderConfig(256, width, max(1, width // 16), 4 * width, layers, 64), SplitMix64(1))
    opt = AdamW(model.parameters)
    tensors = safetensors.numpy.load_file(_save(ours, model, opt))
    order = [("save", lambda: _save(ours, model, opt)),
             ("libsave", lambda: safetensors.numpy.save_file(tensors, theirs)),
             ("load", lambda: checkpoint.load(ours)),
             ("libload", lambda: safetensors.numpy.load_file(theirs))]
    samples: Dict[str, List[float]] = {k: [] for k, _ in order}
    for r in range(repeat):
        for key, fn in (order if r % 2 == 0 else order[::-1]):
            samples[key].append(_seconds(fn))
    return {k: statistics.median(v) * 1e3 for k, v in samples.items()}


def _save(path: str, model: DecoderModel, opt: AdamW) -> str:
    checkpoint.save(path, model, optimizer=opt, rng=SplitMix64(2), step=0)
    return path


if __name__ == "__main__":
    main()
