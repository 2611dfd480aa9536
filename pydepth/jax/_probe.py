# SPDX-License-Identifier: MIT
"""What each block adds to its residual stream, read from one probe trace: the site taps emit a
marker primitive instead of their reverse rule, and the traced program says whether the named
attention submodule's output is added to the block input as it is, times a constant (a
residual multiplier), or only after something else (a post-branch norm) — which the mid site
cannot observe, so the observation is refused with the reason instead of reporting a wrong site."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
from jax.extend.core import Literal, Primitive
from jax.interpreters import ad, batching, mlir

from ..errors import SiteSpecError

__all__ = ["mark", "added_multiplier"]

_MARK = Primitive("pydepth_site_mark")
_MARK.def_impl(lambda x, kind: x)
_MARK.def_abstract_eval(lambda x, kind: x)
batching.primitive_batchers[_MARK] = lambda args, dims, kind: (_MARK.bind(args[0], kind=kind), dims[0])
ad.primitive_jvps[_MARK] = lambda primals, tangents, kind: (_MARK.bind(primals[0], kind=kind), tangents[0])
mlir.register_lowering(_MARK, mlir.lower_fun(lambda x, kind: x, multiple_results=False))

#: operations that carry a value on unchanged for this check (a cast, a copy)
_PASS = ("convert_element_type", "copy", "copy_p")


def mark(x: Any, kind: str) -> Any:
    """``x`` marked as the ``kind`` site (``"input"`` or ``"mid"``) in a probe trace."""
    return _MARK.bind(x, kind=kind)


def _sub_jaxprs(params: Dict[str, Any]) -> Iterator[Tuple[Any, List[Any]]]:
    for value in params.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if hasattr(item, "jaxpr") and hasattr(item, "consts"):  # a ClosedJaxpr
                yield item.jaxpr, list(item.consts)
            elif hasattr(item, "eqns"):  # an open Jaxpr
                yield item, []


def _aliases(eqns: List[Any], var: Any) -> List[Any]:
    """``var`` and what casts and copies of it the program makes."""
    out = [var]
    for eqn in eqns:
        if eqn.primitive.name in _PASS and eqn.invars and eqn.invars[0] in out:
            out.append(eqn.outvars[0])
    return out


def _constant(v: Any, consts: Dict[Any, Any]) -> Optional[float]:
    value = v.val if isinstance(v, Literal) else consts.get(v)
    if value is None or np.size(value) != 1:
        return None
    return float(np.asarray(value).reshape(()))


def _classify(eqns: List[Any], consts: Dict[Any, Any], x: Any, a: Any) -> Tuple[Optional[float], str]:
    """(multiplier, what was found): 1.0 for ``x + a``, ``c`` for ``x + c·a``, else ``None``."""
    xs, uses = _aliases(eqns, x), []
    for av in _aliases(eqns, a):
        for eqn in eqns:
            if av not in eqn.invars:
                continue
            other = [v for v in eqn.invars if v is not av]
            if eqn.primitive.name == "add" and other and other[0] in xs:
                return 1.0, "input + attention output"
            if eqn.primitive.name == "mul" and other and _constant(other[0], consts) is not None:
                c = _constant(other[0], consts)
                if any(e.primitive.name == "add" and eqn.outvars[0] in e.invars and
                       any(v in xs for v in e.invars) for e in eqns):
                    return c, f"input + {c!r} × attention output"
            if eqn.primitive.name not in _PASS:
                uses.append(eqn.primitive.name)
    return None, f"the attention output goes into {sorted(set(uses)) or 'nothing'} before any addition to the input"


def _walk(jaxpr: Any, consts: List[Any], found: List[Tuple[Optional[float], str]]) -> None:
    table = dict(zip(jaxpr.constvars, consts))
    last_input = None
    for eqn in jaxpr.eqns:
        if eqn.primitive is _MARK:
            if eqn.params["kind"] == "input":
                last_input = eqn.outvars[0]
            elif eqn.params["kind"] == "mid" and last_input is not None:
                found.append(_classify(jaxpr.eqns, table, last_input, eqn.outvars[0]))
        for sub, sub_consts in _sub_jaxprs(eqn.params):
            _walk(sub, sub_consts, found)


def added_multiplier(closed: Any, attention: str) -> float:
    """The constant each block multiplies its ``attention`` output by before adding it to the
    block input (1.0 for a plain residual), from a probe trace; a block that adds anything else
    raises :class:`SiteSpecError` naming what it does."""
    found: List[Tuple[Optional[float], str]] = []
    _walk(closed.jaxpr, list(closed.consts), found)
    bad = next((what for c, what in found if c is None), None)
    if bad is not None:
        raise SiteSpecError(f"the blocks do not add the output of {attention!r} to the residual: {bad}. The mid "
                            "site would be wrong (a post-branch norm sits between); name the submodule whose "
                            "output is added (e.g. the post-attention norm) as attention")
    multipliers = sorted({c for c, _ in found if c is not None})
    if len(multipliers) > 1:
        raise SiteSpecError(f"the blocks multiply the output of {attention!r} by different constants "
                            f"{multipliers}; one multiplier for all blocks is supported")
    return multipliers[0] if multipliers else 1.0
