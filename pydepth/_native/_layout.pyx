# SPDX-License-Identifier: MIT
# cython: language_level=3, boundscheck=False, wraparound=False
"""The model's layout as the core defines it: node kinds and record modes, configuration rules,
parameter names, shapes and counts, and the id range checks."""
from libc.stdint cimport int64_t, uint8_t
from ._cdefs cimport *
from ._status cimport raise_status


def _node_kind_table():
    cdef const char *ident
    cdef const char *name
    cdef const char *scope
    cdef int kind
    rows = []
    for kind in range(PD_N_COUNT):
        pd_node_kind_info(kind, &ident, &name, &scope)
        rows.append((ident.decode(), name.decode(), scope.decode()))
    return tuple(rows)


#: (identifier, trace name, scope) of every node kind, indexed by kind, from csrc/pd_nodes.h.
NODE_KINDS = _node_kind_table()
#: The kinds a record made for a training step keeps (the lean column of csrc/pd_nodes.h).
KEPT_LEAN = frozenset(kind for kind in range(PD_N_COUNT) if pd_node_kept_lean(kind))
#: The record modes of pd_graph_forward: residual sites only, every value, what a training step reads.
RECORD_NONE, RECORD_ALL, RECORD_TRAINING = PD_RECORD_NONE, PD_RECORD_ALL, PD_RECORD_TRAINING


def validate_name_raw(bytes name):
    """Raises CoreError(index = byte offset) for an invalid parameter name."""
    cdef pd_error e
    cdef pd_status st = pd_validate_name(name, len(name), &e)
    if st != PD_OK:
        raise_status(st, &e)


def config_check_rule(size_t index):
    """The rule of the core's configuration check ``index`` (csrc/pd_decoder.h), or None."""
    cdef const char *rule = pd_config_check_rule(index)
    return None if rule == NULL else rule.decode()


def parameter_count(tuple c):
    """Total stored scalars of a configuration tuple, by the core's checked arithmetic."""
    cdef pd_config cfg = _config(c)
    cdef pd_error e
    cdef size_t count
    cdef pd_status st = pd_config_validate(&cfg, &e)
    if st == PD_OK:
        st = pd_config_parameter_count(&cfg, &count, &e)
    if st != PD_OK:
        raise_status(st, &e)
    return count


def parameter_tensor_count(tuple c):
    """Number of parameter tensors of a configuration tuple (9 * layers + 2)."""
    parameter_count(c)  # validates, and bounds layers
    cdef pd_config cfg = _config(c)
    return pd_param_tensor_count(&cfg)


def parameter_layout(tuple c):
    """(name, shape) of every parameter tensor of a configuration tuple, in declaration order."""
    cdef pd_config cfg = _config(c)
    cdef pd_error e
    cdef size_t i, n, rank, length
    cdef size_t dims[2]
    cdef char buf[128]
    cdef tuple shape
    cdef pd_status st = pd_config_validate(&cfg, &e)
    if st == PD_OK:
        st = pd_config_parameter_count(&cfg, &n, &e)  # every shape below is then in range
    if st != PD_OK:
        raise_status(st, &e)
    n = pd_param_tensor_count(&cfg)
    out = []
    for i in range(n):
        pd_param_shape(&cfg, i, &rank, dims)
        length = pd_param_name(&cfg, i, buf, sizeof(buf))
        shape = tuple([dims[d] for d in range(rank)])
        out.append((buf[:length].decode(), shape))
    return tuple(out)


def check_ids(const int64_t[:, ::1] ids not None, const uint8_t[::1] valid, size_t vocabulary_size,
              bint targets=False):
    """Raises the CoreError the forward (or, with targets=True, the loss) gives for the first id
    outside [0, vocabulary_size) at a valid position; for callers that run no C model."""
    cdef pd_error e
    cdef size_t n = ids.shape[0] * ids.shape[1]
    if valid is not None and <size_t>valid.shape[0] != n:
        raise ValueError(f"validity has {valid.shape[0]} entries for {n} ids")
    cdef pd_status st = PD_OK
    cdef const uint8_t *vp = NULL
    if valid is not None and n:
        vp = &valid[0]
    if n:
        st = pd_check_ids(&ids[0, 0], vp, n, vocabulary_size, targets, &e)
    if st != PD_OK:
        raise_status(st, &e)


cdef pd_config _config(tuple c):
    cdef pd_config cfg
    (cfg.vocabulary_size, cfg.model_width, cfg.heads, cfg.kv_heads, cfg.feed_forward_width,
     cfg.layers, cfg.max_positions, cfg.rope_base, cfg.rms_epsilon) = c
    return cfg
