# SPDX-License-Identifier: MIT
"""What every report states about where it was made: versions, machine, and whether this machine
reproduces the published fixtures bit for bit (``pydepth verify``)."""
from __future__ import annotations

import platform
from typing import List, Sequence, Tuple

from .._version import __version__
from .page import Section, table_html

__all__ = ["environment_section", "verify_section"]


def _versions() -> List[Tuple[str, str]]:
    import numpy
    from .._native._runtime import kernel_path
    from ..threads import get_num_threads
    rows = [("pydepth", __version__), ("Python", platform.python_version()), ("numpy", numpy.__version__),
            ("machine", f"{platform.system()} {platform.machine()}"),
            ("kernel path", kernel_path()), ("threads", str(get_num_threads()))]
    try:
        import matplotlib
        rows.append(("matplotlib", matplotlib.__version__))
    except ImportError:  # figures need it; the tables do not
        pass
    return rows


def environment_section(recorded: Sequence[Tuple[str, str]] = ()) -> Section:
    """The versions the run recorded (if any) beside those of the machine making the report."""
    rows = [(f"{name} (recorded by the run)", value) for name, value in recorded] + _versions()
    return Section("Versions and machine", table_html(("what", "value"), rows))


def verify_section() -> Section:
    """Recomputes the packaged trace fixtures (bit for bit) and the published tables (six decimals)
    here and states pass or fail per fixture."""
    from ..chapter.published import verify_published
    from ..chapter.verify import verify
    rows, failed = [], 0
    for result in [*verify(), *verify_published()]:
        failed += not result.passed
        rows.append((result.fixture_id, "matches" if result.passed else "DIFFERS",
                     result.checked, result.differing, result.first_difference or ""))
    verdict = ('<p class="pass">Every public trace fixture is bit-exact and every published table number is '
               'reproduced on this machine.</p>' if not failed else
               f'<p class="fail">{failed} of {len(rows)} fixtures differ on this machine: its numbers are '
               "not the reference's.</p>")
    return Section("pydepth verify on this machine", verdict + table_html(
        ("fixture", "result", "values checked", "values differing", "first difference"), rows))
