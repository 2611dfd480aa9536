# SPDX-License-Identifier: MIT
"""What one observation is run on: input ids, labels and an attention mask, taken from a held
batch or from a training step's batch in the shapes training code passes around."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...batch import Batch
from ...errors import ArgumentTypeError

__all__ = ["ObservedBatch", "observed_batch", "detached"]


@dataclass(frozen=True)
class ObservedBatch:
    """The arguments of :func:`pydepth.torch.observe_residual_health` for one observation."""

    input_ids: Any
    labels: Any = None
    attention_mask: Any = None
    position_ids: Any = None


def _is_ids(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def observed_batch(batch: Any) -> ObservedBatch:
    """Reads a batch as training code holds it: a mapping with ``input_ids`` (and optionally
    ``labels``, ``attention_mask`` and ``position_ids``, as a Hugging Face collator gives; packed
    rows of ``DataCollatorWithFlattening`` keep their restarting positions), a tensor or array of
    ids, a ``(input_ids, labels)`` pair, a :class:`pydepth.Batch`, or an :class:`ObservedBatch`.
    Anything else raises :class:`pydepth.ArgumentTypeError` naming its type."""
    if isinstance(batch, ObservedBatch):
        return batch
    if isinstance(batch, Batch):
        return ObservedBatch(batch)
    if isinstance(batch, Mapping):
        if "input_ids" not in batch:
            raise ArgumentTypeError(f"a batch mapping needs 'input_ids'; got keys {sorted(map(str, batch))}")
        return ObservedBatch(batch["input_ids"], batch.get("labels"), batch.get("attention_mask"),
                             batch.get("position_ids"))
    if _is_ids(batch):
        return ObservedBatch(batch)
    if isinstance(batch, (tuple, list)) and len(batch) == 2 and all(_is_ids(v) for v in batch):
        return ObservedBatch(batch[0], batch[1])
    raise ArgumentTypeError(
        f"cannot read input ids from a {type(batch).__name__}: pass a mapping with 'input_ids', a tensor "
        "of ids, an (input_ids, labels) pair, or convert the batch yourself (inputs=...)")


def detached(batch: ObservedBatch) -> ObservedBatch:
    """The same batch with tensors detached, so a kept batch holds no autograd graph."""
    def cut(v: Any) -> Any:
        return v.detach() if hasattr(v, "detach") and hasattr(v, "requires_grad") else v
    return ObservedBatch(cut(batch.input_ids), cut(batch.labels), cut(batch.attention_mask),
                         cut(batch.position_ids))
