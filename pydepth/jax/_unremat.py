# SPDX-License-Identifier: MIT
"""The observation's reverse pass without the model's recomputation of matrix products: every
checkpointed region (``jax.checkpoint``, ``nn.remat``, ``eqx.filter_checkpoint``) of the traced
loss gets the policy that saves the outputs of its matrix products
(``jax.checkpoint_policies.checkpoint_dots``), so the backward pass recomputes only elementwise
operations instead of running each layer's forward again.

An observation computes no weight gradient, so its reverse pass costs about one forward; the
model's recomputation adds another forward. On the 12-layer width-256 scanned Linen model of
``benchmarks/bench_jax_observe.py`` XLA counts 0.59x a ``value_and_grad`` step's FLOPs with this
policy and 0.80x with the model's own (saving every residual instead also gives 0.59x but moves
twice the bytes). The saved products are the activation memory of the model's matrix outputs
for one batch. Values do not change: a saved product is the value the recomputation gives.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

import jax
from jax.extend.core import ClosedJaxpr, Jaxpr, jaxpr_as_fun

__all__ = ["without_recompute", "REMAT_PRIMITIVES", "POLICY"]

#: the primitives of checkpointed regions whose ``policy`` the observation replaces
REMAT_PRIMITIVES = frozenset({"remat2", "checkpoint", "remat"})

#: what a checkpointed region saves inside the observation (module docstring)
POLICY = jax.checkpoint_policies.checkpoint_dots

# the reverse rules of custom derivatives stay as their authors wrote them (the site taps among them)
_KEEP = frozenset({"custom_vjp_call", "custom_vjp_call_jaxpr", "custom_jvp_call", "custom_lin"})


def _rewrite_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    eqns = []
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _KEEP:
            eqns.append(eqn)
            continue
        params: Dict[str, Any] = {k: _rewrite_param(v) for k, v in eqn.params.items()}
        if name in REMAT_PRIMITIVES and "policy" in params:
            params["policy"] = POLICY
        eqns.append(eqn.replace(params=params))
    return jaxpr.replace(eqns=eqns)


def _rewrite_param(value: Any) -> Any:
    if isinstance(value, ClosedJaxpr):
        return ClosedJaxpr(_rewrite_jaxpr(value.jaxpr), value.consts)
    if isinstance(value, Jaxpr):
        return _rewrite_jaxpr(value)
    if isinstance(value, tuple) and any(isinstance(v, (ClosedJaxpr, Jaxpr)) for v in value):
        return tuple(_rewrite_param(v) for v in value)
    return value


def without_recompute(fn: Callable[[Any], Any], example: Any) -> Callable[[Any], Any]:
    """``fn`` (one pytree argument, a scalar result) traced at ``example`` and rebuilt with every
    checkpointed region saving its matrix products; same values, differentiable. Call it with
    arguments of ``example``'s structure, shapes and dtypes."""
    closed = jax.make_jaxpr(fn)(example)
    run = jaxpr_as_fun(ClosedJaxpr(_rewrite_jaxpr(closed.jaxpr), closed.consts))

    def call(arg: Any) -> Any:
        return run(*jax.tree_util.tree_leaves(arg))[0]

    return call
