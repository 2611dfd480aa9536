# SPDX-License-Identifier: MIT
"""The health report declared once: its dictionary, its printed table and the sweep's rows are read
from the fields of the report dataclasses, so a field added there reaches every form."""
import dataclasses
import math
import struct

import pytest

from pydepth import BranchHealthRow, DepthHealthReport, RatioBand, ResidualHealthRow
from pydepth._fields import as_dict, column_name, declared, kind_of, quantity, table_cells, table_header
from pydepth.health import health_report_from_rms, site_table
from pydepth.sweep.rows import COLUMNS, SITE_COLUMNS, append_rows, empty_columns, error_row, health_rows
from pydepth.sweep.spec import SweepSpec


def float_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def report(acts=(2.0, 3.0, 0.01, 5.0, 7.0), grads=(11.0, 13.0, 0.17, 19.0, 23.0)):
    return health_report_from_rms(list(acts), list(grads), valid_positions=6, width=4, band=(0.01, 100.0))


def a_cell():
    return SweepSpec(depths=(2,), widths=(4,), seeds=(1,), policies=("scaled",), steps=(0,)).cells()[0]


def test_every_report_dataclass_field_is_declared_with_a_description():
    for cls in (ResidualHealthRow, BranchHealthRow, DepthHealthReport):
        names = [f.name for f in dataclasses.fields(cls)]
        assert [name for name, _ in declared(cls)] == names, cls
        assert all(q.description for _, q in declared(cls)), cls


def test_a_site_row_dict_holds_every_field_by_name_in_field_order_statuses_as_strings():
    row = report().sites[1]
    d = row.to_dict()
    assert list(d) == [f.name for f in dataclasses.fields(ResidualHealthRow)]
    for name, value in d.items():
        field = getattr(row, name)
        assert value == (field.value if isinstance(field, RatioBand) else field)
    assert d["activation_status"] == "within" and d["label"] == "block.0.after_attention"


def test_the_report_dict_holds_every_field_then_the_summaries():
    rep = report()
    d = rep.to_dict()
    fields = [f.name for f in dataclasses.fields(DepthHealthReport)]
    assert list(d)[:len(fields)] == fields
    assert d["sites"] == [r.to_dict() for r in rep.sites] and d["band"] == [0.01, 100.0]
    assert (d["activation_ratio_min"], d["activation_ratio_max"]) == rep.activation_ratio_range
    assert d["within_band"] is rep.within_band


def test_the_printed_table_has_one_column_per_declared_heading_in_field_order():
    rep = report()
    header = table_header(ResidualHealthRow)
    assert header == tuple(q.heading for _, q in declared(ResidualHealthRow) if q.heading)
    lines = site_table([r.to_dict() for r in rep.sites])
    assert lines[0].split() == [w for h in header for w in h.split()]
    assert len(lines) == 2 + len(rep.sites)
    assert lines[2 + 3].split() == table_cells(ResidualHealthRow, rep.sites[3].to_dict())
    assert f"{rep.sites[3].adjoint_rms:.4g}" in rep.to_table()


def test_the_sweep_site_columns_are_the_declared_fields_in_order_between_the_cell_and_step_columns():
    declared_columns = [(column_name(n, q), kind_of(ResidualHealthRow, n)) for n, q in declared(ResidualHealthRow)]
    names = [n for n, _ in COLUMNS]
    first = names.index(declared_columns[0][0])
    assert list(COLUMNS[first:first + len(declared_columns)]) == declared_columns
    assert names[first - 1] == "step" and names[first + len(declared_columns)] == "loss"
    assert len(set(names)) == len(names)


def test_a_sweep_health_row_holds_each_site_field_bit_for_bit_keyed_by_column():
    rep = report()
    rows = health_rows(3, rep, 0.625)
    assert len(rows) == len(rep.sites)
    for row, site in zip(rows, rep.sites):
        for column, name, kind in SITE_COLUMNS:
            value = getattr(site, name)
            if kind == "float":
                assert float_bits(row[column]) == float_bits(value)
            else:
                assert row[column] == (value.value if isinstance(value, RatioBand) else value)
        assert (row["step"], row["loss"], row["within_band"], row["error"]) == (3, 0.625, rep.within_band, "")


def test_an_error_row_fills_every_site_column_with_no_site():
    row = error_row(2, ValueError("bad"))
    assert set(row) == set(health_rows(0, report(), 1.0)[0])
    assert row["site"] == -1 and row["site_label"] == "" and math.isnan(row["activation_ratio"])
    assert row["error"] == "ValueError: bad" and row["within_band"] is False


def test_appended_rows_fill_every_column_in_order_and_a_row_missing_a_column_is_refused():
    out = empty_columns()
    append_rows(out, a_cell(), health_rows(0, report(), 1.5), 1.0, 99, 0.25)
    assert list(out) == [n for n, _ in COLUMNS] and {len(v) for v in out.values()} == {5}
    assert out["site_label"] == [r.label for r in report().sites] and out["parameters"] == [99] * 5
    broken = health_rows(0, report(), 1.5)[:1]
    del broken[0]["adjoint_rms"]
    with pytest.raises(KeyError, match="adjoint_rms"):
        append_rows(empty_columns(), a_cell(), broken, 1.0, 99, 0.25)


def test_a_field_declared_on_a_new_report_reaches_its_dict_table_and_column_kind():
    @dataclasses.dataclass(frozen=True)
    class Row:
        site: int = quantity("the site", heading="site")
        spread: float = quantity("a new per-site quantity", unit="1", column="site_spread", heading="S",
                                 fmt=".3f", metric=True)
        status: RatioBand = quantity("a band status", heading="class")

    row = Row(4, 0.5, RatioBand.ABOVE)
    assert as_dict(row) == {"site": 4, "spread": 0.5, "status": "above"}
    assert table_header(Row) == ("site", "S", "class")
    assert table_cells(Row, as_dict(row)) == ["4", "0.500", "above"]
    assert [column_name(n, q) for n, q in declared(Row)] == ["site", "site_spread", "status"]
    assert [kind_of(Row, n) for n, _ in declared(Row)] == ["int", "float", "str"]
