# SPDX-License-Identifier: MIT
"""The optimizers' element order of docs/numerics-optimizers.md written out in numpy, one
operation per line (numpy rounds each one): the contract the optimizer tests compare against."""
import numpy as np


def powi(x, k):
    """Binary exponentiation from the low bit, as docs/numerics-optimizers.md states it."""
    r = 1.0
    while k:
        if k & 1:
            r = r * x
        x = x * x
        k >>= 1
    return r


def adamw_contract(p, g, m, v, t, lr, b1, b2, eps, wd):
    """AdamW's step t for one parameter: (new value, first moment, second moment)."""
    p0 = p * (1.0 - lr * wd) if wd != 0.0 else p
    w1 = 1.0 - b1
    m1 = m + w1 * (g - m) if w1 < 0.5 else g - (g - m) * (1.0 - w1)
    v1 = v * b2 + ((1.0 - b2) * g) * g
    neg_step = -(lr / (1.0 - powi(b1, t)))
    denom = np.sqrt(v1) / np.sqrt(1.0 - powi(b2, t)) + eps
    return p0 + (neg_step * m1) / denom, m1, v1


def sgd_contract(p, g, buf, t, lr, momentum, wd):
    """SGD's step t for one parameter: (new value, momentum buffer)."""
    d = g + wd * p if wd != 0.0 else g
    if momentum != 0.0:
        buf = d if t == 1 else buf * momentum + d
        d = buf
    return p + (-lr) * d, buf
