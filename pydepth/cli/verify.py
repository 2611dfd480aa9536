"""``pydepth verify``: recompute the public fixtures and compare every value bit for bit."""
from __future__ import annotations

import argparse
import platform
import sys

from . import _args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the ``verify`` subcommand and its options."""
    p = sub.add_parser("verify", help="check the bit-exactness claim on this machine (public fixtures)",
                       description="Recomputes every traced value of the reference fixtures shipped with "
                       "pydepth and compares bit patterns; prints pass/fail per fixture with the first "
                       "differing value. Exit status 1 on any difference.")
    p.add_argument("--fixtures", metavar="TRACE.json", default=None,
                   help="a pydepth-reference-trace-v1 file (default: the packaged public fixtures)")
    p.add_argument("--threads", type=_args.positive, default=None,
                   help="worker threads for the run (results never depend on it)")


def run(args: argparse.Namespace) -> int:
    """Runs ``pydepth verify``; returns 0 when every fixture is bit-exact, else 1."""
    from .._native._core import kernel_path
    from ..threads import get_num_threads, set_num_threads
    from ..chapter.verify import load_fixtures, public_fixtures_path, verify_fixture
    if args.threads is not None:
        set_num_threads(args.threads)
    source = args.fixtures if args.fixtures is not None else public_fixtures_path()
    fixtures = load_fixtures(source)
    out = sys.stdout
    out.write(f"verifying {len(fixtures)} fixtures from {source}\n")
    out.write(f"on {platform.system()} {platform.machine()}, Python {platform.python_version()}, "
              f"kernel path {kernel_path()}, {get_num_threads()} threads\n")
    failed = 0
    for fixture in fixtures:
        result = verify_fixture(fixture)
        if result.passed:
            out.write(f"PASS {result.fixture_id}: {result.checked} values bit-exact\n")
        else:
            failed += 1
            out.write(f"FAIL {result.fixture_id}: {result.differing} of {result.checked} values differ; "
                      f"first: {result.first_difference}\n")
        out.flush()
    out.write("all fixtures bit-exact\n" if not failed else f"{failed} of {len(fixtures)} fixtures differ\n")
    return 1 if failed else 0
