# SPDX-License-Identifier: MIT
"""Byte-level training pieces: corpus documents, packed batches drawn from a SplitMix64, and one
optimizer step that can observe residual health on the same reverse pass."""
from __future__ import annotations

import contextlib
import re
from typing import Any, ContextManager, Optional, Sequence, Tuple

import numpy as np

from .._native._rng import SplitMix64
from ..batch import Batch
from ..config import DecoderConfig
from ..errors import ConfigError, TokenError
from ..health import DepthHealthReport, observe_residual_health
from ..model import DecoderModel
from ..optim import Optimizer

__all__ = ["BYTE_VOCABULARY", "byte_documents", "check_byte_config", "draw_batch", "loss_and_gradients",
           "train_step", "observe_step"]

#: Byte-level ids are 0..255; a model needs at least this vocabulary.
BYTE_VOCABULARY = 256


def byte_documents(text: bytes) -> Tuple[np.ndarray, ...]:
    """The paragraphs of a text (split at blank lines, trailing whitespace kept inside) as int64
    byte ids; paragraphs shorter than 2 bytes carry no target and are dropped."""
    if not isinstance(text, (bytes, bytearray)):
        raise TypeError(f"text must be bytes, got {type(text).__name__}")
    parts = re.split(rb"\n(?:[ \t]*\n)+", bytes(text))
    docs = tuple(np.frombuffer(p.strip(b"\n") + b"\n", dtype=np.uint8).astype(np.int64) for p in parts if p.strip())
    docs = tuple(d for d in docs if d.size >= 2)
    if not docs:
        raise TokenError("the text has no paragraph of at least 2 bytes to train on")
    return docs


def check_byte_config(config: DecoderConfig, tokens: int) -> None:
    """Refuses a configuration that cannot hold byte ids or rows of `tokens` positions."""
    if config.vocabulary_size < BYTE_VOCABULARY:
        raise ConfigError(f"byte-level training needs vocabulary_size >= {BYTE_VOCABULARY}, "
                          f"got {config.vocabulary_size}")
    if not 0 < tokens <= config.max_positions:
        raise ConfigError(f"tokens per row must be in [1, max_positions={config.max_positions}], got {tokens}")


def draw_batch(documents: Sequence[np.ndarray], rng: SplitMix64, batch: int, tokens: int) -> Batch:
    """`batch` rows of exactly `tokens` positions packed with Batch.pack. Each row is filled in
    order with pieces: document d = next_u64() % len(documents), start o = next_u64() % (len(d) - 1),
    piece d[o : o + remaining + 1] (one segment of at least one position)."""
    if batch <= 0 or tokens <= 0:
        raise TokenError(f"batch and tokens must be positive, got {batch} and {tokens}")
    sources = []
    for _ in range(batch):
        remaining = tokens
        while remaining:
            doc = documents[rng.next_u64() % len(documents)]
            start = rng.next_u64() % (doc.size - 1)
            piece = doc[start:start + remaining + 1]
            sources.append(piece)
            remaining -= piece.size - 1
    return Batch.pack(sources, tokens)  # pieces fill each row exactly, so packing keeps the rows


def loss_and_gradients(model: DecoderModel, tokens: Any, targets: Any = None, *, observe: bool = False,
                       band: Any = None) -> Tuple[float, Optional[DepthHealthReport]]:
    """Forward and mean loss on ``tokens`` (a Batch, or ids with ``targets``), then one reverse
    pass: observing residual health in ``band`` on it when observe=True (the gradients are the
    same bits), else ``loss.backward()``, on a forward that keeps only what a training step reads.
    Returns the loss and the report (None unless observed)."""
    fwd = model.forward(tokens, keep="training")
    loss = fwd.loss(targets)
    report = (observe_residual_health(model, fwd, loss, band=band, accumulate_gradients=True)
              if observe else None)
    if not observe:
        loss.backward()
    value = loss.item()
    fwd.release()
    return value, report


def _core_runs_update(model: DecoderModel, optimizer: Any) -> bool:
    """Whether ``model.train_step`` can run ``optimizer``'s update in its one core call: a
    :class:`pydepth.optim.Optimizer` whose ``zero_grad`` and ``step`` are the library's (a subclass
    overriding them keeps its own) over parameters of ``model`` only."""
    kind = type(optimizer)
    if not isinstance(optimizer, Optimizer):
        return False
    if kind.step is not Optimizer.step or kind.zero_grad is not Optimizer.zero_grad:
        return False
    own = dict(model.named_parameters())
    return all(own.get(p.name) is p for p in optimizer.parameters)


def train_step(model: DecoderModel, optimizer: Optimizer, batch: Batch, *,
               observe: bool = False, interruptible: Optional[ContextManager[Any]] = None
               ) -> Tuple[float, Optional[DepthHealthReport]]:
    """One optimizer step on ``batch``: zero gradients, forward, loss, reverse pass, update.
    Returns the loss before the update and the report (None unless observed). Without observing,
    and with an optimizer whose update the core can run (a pydepth optimizer over parameters of
    ``model``, ``step`` not overridden), it is ``model.train_step(batch, optimizer=optimizer)``,
    one core call; otherwise the calls run one by one, :func:`loss_and_gradients` (observing
    residual health on the reverse pass when observe=True) then ``optimizer.step()``: the same
    bits either way.

    ``interruptible`` is entered around the part that may be abandoned, the forward and reverse
    passes; the update is all or nothing. The one core call runs inside it whole, its final poll
    (``pd_interrupt_final``) marking where the update begins, which a stop handler reads."""
    window = interruptible if interruptible is not None else contextlib.nullcontext()
    if not observe and _core_runs_update(model, optimizer):
        with window:
            return model.train_step(batch, optimizer=optimizer), None
    optimizer.zero_grad()
    with window:
        value, report = loss_and_gradients(model, batch, observe=observe)
    optimizer.step()
    return value, report


def observe_step(model: DecoderModel, batch: Batch) -> Tuple[float, DepthHealthReport]:
    """Residual health of the current parameters on `batch` without training: the loss and the
    report train_step(observe=True) would return, with every parameter's .grad left as it was."""
    fwd = model.forward(batch, keep="training")
    loss = fwd.loss()
    report = observe_residual_health(model, fwd, loss, accumulate_gradients=False)
    value = loss.item()
    fwd.release()
    return value, report
