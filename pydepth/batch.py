# SPDX-License-Identifier: MIT
"""Batch: occurrence-local packed rows of segments, with padding and validity."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from ._checks import as_u64, plain_array
from .config import DecoderConfig
from .errors import AllocationError, TokenError

_INT64_MAX = 2**63 - 1
#: Longest row Batch.pack builds: one row's attention weights alone would take T*T*8 bytes
#: (8 TiB at this length) per head, so no model can read a longer one.
MAX_ROW_LENGTH = 2**20


def _int2d(name: str, values: Any) -> np.ndarray:
    arr = plain_array(name, values, TokenError)
    if arr.dtype.kind not in "iu":
        raise TokenError(f"{name} must be integer arrays, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise TokenError(f"{name} must have rank 2 [rows, row_length], got shape {arr.shape}")
    if arr.dtype.kind == "u" and arr.size and arr.max() > _INT64_MAX:  # would wrap negative
        b, t = (int(x) for x in np.argwhere(arr > _INT64_MAX)[0])
        raise TokenError(f"{name} value {int(arr[b, t])} at position [{b}, {t}] exceeds 2**63 - 1")
    return arr.astype(np.int64)


class Batch:
    """Rows [B, T] holding one or more segments each. Every segment restarts positions at 0,
    attends only within itself, and padding (segment id -1) is never looked up, attends to
    nothing, is attended by nothing and contributes nothing to the loss."""

    def __init__(self, tokens: Any, targets: Any, segment_ids: Any) -> None:
        tok = _int2d("tokens", tokens)
        tgt = _int2d("targets", targets)
        seg = _int2d("segment_ids", segment_ids)
        if not (tok.shape == tgt.shape == seg.shape):
            raise TokenError(f"tokens {tok.shape}, targets {tgt.shape} and segment_ids {seg.shape} "
                             "must share one shape")
        B, T = tok.shape
        if B == 0 or T == 0:
            raise TokenError(f"batch shape {tok.shape} is empty")
        if np.any(seg < -1):
            b, t = (int(x) for x in np.argwhere(seg < -1)[0])
            raise TokenError(f"segment id {int(seg[b, t])} at position [{b}, {t}]; use -1 for padding")
        valid = seg >= 0
        if not valid.any():
            raise TokenError("batch has no valid position")
        bad = np.argwhere(valid & (tok < 0))
        if bad.size:
            b, t = (int(x) for x in bad[0])
            raise TokenError(f"padding id {int(tok[b, t])} at valid position [{b}, {t}]")
        bad = np.argwhere(valid & (tgt < 0))
        if bad.size:
            b, t = (int(x) for x in bad[0])
            raise TokenError(f"target id {int(tgt[b, t])} at valid position [{b}, {t}]")
        positions = np.zeros((B, T), dtype=np.int64)
        starts = np.zeros((B, T), dtype=np.int64)
        seen_rows: Dict[int, Tuple[int, int]] = {}
        for b in range(B):
            t = 0
            while t < T:
                s = int(seg[b, t])
                if s < 0:
                    starts[b, t] = t
                    t += 1
                    continue
                if s in seen_rows:
                    where = seen_rows[s]
                    kind = "crosses a row end" if where[0] != b else "is not contiguous"
                    raise TokenError(f"segment {s} {kind}: it appears at position {list(where)} "
                                     f"and again at [{b}, {t}]")
                start = t
                while t < T and seg[b, t] == s:
                    positions[b, t] = t - start
                    starts[b, t] = start
                    t += 1
                seen_rows[s] = (b, t - 1)
        self._tokens = tok
        self._targets = tgt
        self._segment_ids = seg
        self._valid = valid
        self._positions = positions
        self._starts = starts
        for a in (tok, tgt, seg, valid, positions, starts):
            a.setflags(write=False)

    @classmethod
    def pack(cls, sources: Sequence[Union[Sequence[int], np.ndarray]], row_length: int, pad_id: int = -1) -> Batch:
        """Greedy packing: each source (>= 2 ids) becomes one segment with inputs source[:-1]
        and targets source[1:]; segments fill rows of row_length in order, a new row starting
        whenever the next segment does not fit in the current one. Never truncates."""
        row_length = as_u64("row_length", row_length, TokenError, minimum=1, maximum=MAX_ROW_LENGTH)
        pad_id = as_u64("pad_id", pad_id, TokenError, minimum=-_INT64_MAX - 1, maximum=_INT64_MAX)
        try:
            sources = list(sources)
        except TypeError:
            raise TokenError(f"sources must be a sequence of id sequences, got {type(sources).__name__}") from None
        if len(sources) == 0:
            raise TokenError("pack needs at least one source sequence")
        rows: List[List[Tuple[int, np.ndarray]]] = []
        current: List[Tuple[int, np.ndarray]] = []
        used = 0
        for i, src in enumerate(sources):
            arr = plain_array(f"source {i}", src, TokenError)
            if arr.dtype.kind not in "iu" or arr.ndim != 1:
                raise TokenError(f"source {i} must be a 1-D integer sequence, got {arr.dtype} shape {arr.shape}")
            if arr.size < 2:
                raise TokenError(f"source {i} has {arr.size} ids; a segment needs at least 2 (input and target)")
            n = arr.size - 1
            if n > row_length:
                raise TokenError(f"source {i} gives a segment of {n} positions, longer than row_length {row_length}")
            if used + n > row_length:
                rows.append(current)
                current, used = [], 0
            current.append((i, arr))
            used += n
        rows.append(current)
        B = len(rows)
        try:
            tok: np.ndarray = np.full((B, row_length), pad_id, dtype=np.int64)
            tgt: np.ndarray = np.full((B, row_length), pad_id, dtype=np.int64)
            seg: np.ndarray = np.full((B, row_length), -1, dtype=np.int64)
        except MemoryError:
            raise AllocationError(f"cannot allocate {B} rows of row_length {row_length}") from None
        for b, row in enumerate(rows):
            t = 0
            for i, arr in row:
                n = arr.size - 1
                tok[b, t:t + n] = arr[:-1]
                tgt[b, t:t + n] = arr[1:]
                seg[b, t:t + n] = i
                t += n
        return cls(tok, tgt, seg)

    @property
    def tokens(self) -> np.ndarray:
        """Input ids [B, T]; padding positions hold the pad id."""
        return self._tokens

    @property
    def targets(self) -> np.ndarray:
        """Next-token targets [B, T]; read only at valid positions."""
        return self._targets

    @property
    def segment_ids(self) -> np.ndarray:
        """Segment of each position [B, T]; -1 marks padding."""
        return self._segment_ids

    @property
    def valid(self) -> np.ndarray:
        """Boolean validity mask [B, T]."""
        return self._valid

    @property
    def positions(self) -> np.ndarray:
        """Segment-local positions [B, T] (0 at each segment's first token; 0 at padding)."""
        return self._positions

    @property
    def shape(self) -> Tuple[int, int]:
        """(rows, row_length)."""
        return tuple(self._tokens.shape)

    def segments(self) -> Tuple[Tuple[int, int, int], ...]:
        """(row, start, length) of every segment, in row-major order."""
        out = []
        B, T = self.shape
        for b in range(B):
            for t in range(T):
                if self._valid[b, t] and self._positions[b, t] == 0:
                    n = 1
                    while t + n < T and self._valid[b, t + n] and self._starts[b, t + n] == t:
                        n += 1
                    out.append((b, t, n))
        return tuple(out)

    def _core_layout(self, cfg: DecoderConfig) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        bad = np.argwhere(self._valid & (self._positions >= cfg.max_positions))
        if bad.size:
            b, t = (int(x) for x in bad[0])
            raise TokenError(f"segment {int(self._segment_ids[b, t])} is longer than max_positions "
                             f"{cfg.max_positions} (position {int(self._positions[b, t])} at [{b}, {t}])")
        # the core checks the id range at valid positions; padding reads as id 0
        ids = np.ascontiguousarray(np.where(self._valid, self._tokens, 0), dtype=np.int64)
        valid = np.ascontiguousarray(self._valid, dtype=np.uint8).reshape(-1)
        pos = np.ascontiguousarray(self._positions, dtype=np.uintp).reshape(-1)
        seg = np.ascontiguousarray(self._starts, dtype=np.uintp).reshape(-1)
        return ids, valid, pos, seg

    def _core_targets(self) -> np.ndarray:
        """Targets [B, T] for the core, which checks their range at valid positions (0 at padding)."""
        return np.ascontiguousarray(np.where(self._valid, self._targets, 0), dtype=np.int64)

    def __repr__(self) -> str:
        return f"Batch(shape={self.shape}, segments={len(self.segments())}, valid={int(self._valid.sum())})"
