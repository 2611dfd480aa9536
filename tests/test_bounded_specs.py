# SPDX-License-Identifier: MIT
"""Sweep specs and options bounded before any work: duplicates found in linear time, the grid's
configurations and cells counted before one is built, workers bounded by the machine, long
numbers refused before they are converted. Each refusal is typed and names the field."""
import os

import pytest

from pydepth.cli import main
from pydepth.sweep import SweepSpec, SweepSpecError, run
from pydepth.sweep.run import max_workers
from pydepth.sweep.spec import MAX_CELLS, MAX_PAIRS, MAX_VALUES, parse_int_list


def test_a_duplicate_at_the_end_of_a_hundred_thousand_seeds_is_found_in_linear_time():
    with pytest.raises(SweepSpecError, match="seeds repeats 100000"):
        SweepSpec(depths=[1], widths=[8], seeds="0-100000,100000")


def test_the_command_line_answers_a_duplicated_seed_range_in_one_line(tmp_path, capsys):
    assert main(["sweep", "--depths", "1", "--widths", "8", "--seeds", "0-100000,100000",
                 "--out", str(tmp_path / "s")]) == 1
    assert "seeds repeats 100000" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_the_grid_is_counted_before_any_configuration_is_built(monkeypatch):
    def forbidden(self, depth, width):
        raise AssertionError("a configuration was built for a grid over the cap")
    monkeypatch.setattr(SweepSpec, "config", forbidden)
    with pytest.raises(SweepSpecError, match=f"make 36859904 model configurations; a sweep holds at most {MAX_PAIRS}"):
        SweepSpec(depths="1-4096", widths="2-9000", seeds=[0])
    with pytest.raises(SweepSpecError, match=f"cells; a sweep holds at most {MAX_CELLS}"):
        SweepSpec(depths="1-64", widths="2-65", seeds="0-100", policies=["scaled", "unscaled"])


def test_lists_and_ranges_are_capped_in_their_number_of_values():
    with pytest.raises(SweepSpecError, match=f"names more than {MAX_VALUES} values"):
        parse_int_list(",".join(["0-100000"] * 3), "seeds")
    with pytest.raises(SweepSpecError, match=f"seeds holds more than {MAX_VALUES} values"):
        SweepSpec(depths=[1], widths=[8], seeds=range(10**12))
    with pytest.raises(SweepSpecError, match="cannot read"):
        parse_int_list("1" * 5000, "seeds")


def test_workers_are_bounded_by_what_this_machine_can_run(tmp_path):
    spec = SweepSpec(depths=[1], widths=[8], seeds=[0])
    for workers in (2**64, max_workers() + 1, 0):
        with pytest.raises(SweepSpecError, match=r"workers must be an integer in \[1, "):
            run(spec, out=tmp_path / "s", workers=workers)
    assert max_workers() == 4 * max(1, os.cpu_count() or 1)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("option", ["--batch", "--steps", "--seed", "--checkpoint-every"])
def test_a_number_too_long_to_be_an_option_is_refused_before_conversion(option, capsys, tmp_path):
    (tmp_path / "t.txt").write_text("some text\n\nto train on\n")
    (tmp_path / "c.json").write_text('{"vocabulary_size": 256, "model_width": 8, "heads": 2, '
                                     '"feed_forward_width": 8, "layers": 1, "max_positions": 8}')
    try:
        code = main(["train", str(tmp_path / "t.txt"), "--config", str(tmp_path / "c.json"), option, "9" * 5000])
    except SystemExit as stop:
        code = stop.code
    assert code in (1, 2)
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()[-1]) < 300
    assert not (tmp_path / "train-out").exists()
