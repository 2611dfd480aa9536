# SPDX-License-Identifier: MIT
"""Hooks that live for one training forward only: registered when a step is due and removed at
the end of the next training-mode call (``always_call``, so also when that forward raises), so
no hook outlives the step it was armed for."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from torch import nn

__all__ = ["OneForward"]

Pre = Callable[[nn.Module, Tuple[Any, ...], Dict[str, Any]], None]
Post = Callable[[nn.Module, Tuple[Any, ...], Dict[str, Any], Any], None]


class OneForward:
    """A pre-hook and a post-hook on ``module`` for its next training-mode forward; evaluation
    calls in between pass through untouched. :meth:`remove` takes both off at any time."""

    def __init__(self) -> None:
        self._handles: List[Any] = []
        self._live = False

    @property
    def armed(self) -> bool:
        """Whether the hooks are registered."""
        return bool(self._handles)

    def arm(self, module: nn.Module, pre: Pre, post: Optional[Post] = None) -> None:
        """Registers the hooks (after removing any earlier pair)."""
        self.remove()

        def before(m: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
            self._live = m.training  # an evaluation call in between is not the step's forward
            if self._live:
                pre(m, args, kwargs)

        def after(m: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> None:
            if not self._live:
                return
            self._live = False
            self.remove()
            if post is not None:
                post(m, args, kwargs, out)

        self._handles = [module.register_forward_pre_hook(before, with_kwargs=True),
                         module.register_forward_hook(after, with_kwargs=True, always_call=True)]

    def remove(self) -> None:
        """Removes both hooks (nothing when none is registered)."""
        for h in self._handles:
            h.remove()
        self._handles = []
