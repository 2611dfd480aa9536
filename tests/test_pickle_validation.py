# SPDX-License-Identifier: MIT
"""Unpickling is construction: a pickled DecoderConfig is checked like a new one, and a core
status that escapes translation is still a readable PydepthError."""
import copyreg
import pickle

import pytest

import pydepth
from pydepth import DecoderConfig
from pydepth._native import _status

GOOD = DecoderConfig(10, 4, 1, 4, 1, 8).to_dict()


class Forged:
    """Pickles as a DecoderConfig whose state skips __init__ (the default object protocol)."""

    def __init__(self, **fields):
        self.fields = fields

    def __reduce__(self):
        return (copyreg._reconstructor, (DecoderConfig, object, None), dict(GOOD, **self.fields))


def test_a_valid_config_survives_a_pickle_round_trip():
    cfg = DecoderConfig(40, 8, 2, 16, 2, 6, kv_heads=1, rope_base=500.0)
    assert pickle.loads(pickle.dumps(cfg)) == cfg


@pytest.mark.parametrize("fields,match", [
    ({"heads": 0}, "heads must be positive"),
    ({"layers": -1}, r"layers must be in \[0, 2\*\*64\), got -1"),
    ({"rope_base": float("nan")}, "rope_base"),
    ({"model_width": "4"}, "model_width must be an integer"),
])
def test_an_unpickled_config_runs_the_checks_of_construction(fields, match):
    with pytest.raises(pydepth.ConfigError, match=match):
        pickle.loads(pickle.dumps(Forged(**fields)))


def test_an_untranslated_core_status_is_a_pydepth_error_that_names_its_status():
    err = _status.CoreError(_status.STATUS_CODES["ERR_CONFIG"], 10, 0.0, -1, -1)
    assert isinstance(err, pydepth.PydepthError)
    assert "ERR_CONFIG" in str(err) and "index 10" in str(err)
