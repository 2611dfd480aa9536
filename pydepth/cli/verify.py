# SPDX-License-Identifier: MIT
"""``pydepth verify``: recompute the public fixtures and compare every value bit for bit."""
from __future__ import annotations

import argparse
import platform
import sys
from typing import Any, TextIO

from . import _args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``verify`` subcommand and its options."""
    p = sub.add_parser("verify", help="check the bit-exactness claim on this machine (public fixtures)",
                       description="Recomputes every traced value of the reference trace fixtures shipped "
                       "with pydepth and compares bit patterns, then recomputes the chapter's four demo "
                       "fixtures and compares every number of its published tables at six decimals; "
                       "prints pass/fail per fixture with the first differing value. Exit status 1 on "
                       "any difference.")
    p.add_argument("--fixtures", metavar="TRACE.json", default=None,
                   help="a pydepth-reference-trace-v1 file (default: the packaged public fixtures)")
    p.add_argument("--threads", type=_args.positive, default=None, metavar="N",
                   help="worker threads for the run (results never depend on it)")


def _write(out: TextIO, result: Any, unit: str) -> bool:
    """One PASS/FAIL line; True when the fixture passed."""
    if result.passed:
        out.write(f"PASS {result.fixture_id}: {result.checked} values {unit}\n")
    else:
        out.write(f"FAIL {result.fixture_id}: {result.differing} of {result.checked} values differ; "
                  f"first: {result.first_difference}\n")
    out.flush()
    return bool(result.passed)


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth verify``; returns 0 when every fixture matches, else 1."""
    from .._native._runtime import kernel_path
    from ..chapter.published import published_tables_path, verify_published
    from ..chapter.verify import load_fixtures, public_fixtures_path, verify_fixture
    from ..threads import get_num_threads, set_num_threads
    if args.threads is not None:
        set_num_threads(args.threads)
    source = args.fixtures if args.fixtures is not None else public_fixtures_path()
    fixtures = load_fixtures(source)
    out = sys.stdout
    out.write(f"verifying {len(fixtures)} trace fixtures from {source} bit for bit\n")
    out.write(f"on {platform.system()} {platform.machine()}, Python {platform.python_version()}, "
              f"kernel path {kernel_path()}, {get_num_threads()} threads\n")
    passed = [_write(out, verify_fixture(f), "bit-exact") for f in fixtures]
    if args.fixtures is None:  # the packaged run also checks the chapter's published tables
        out.write(f"verifying the chapter's published tables from {published_tables_path()} at six decimals\n")
        passed += [_write(out, r, "equal to the published six decimals") for r in verify_published()]
    failed = passed.count(False)
    out.write("all fixtures match\n" if not failed else f"{failed} of {len(passed)} fixtures differ\n")
    return 1 if failed else 0
