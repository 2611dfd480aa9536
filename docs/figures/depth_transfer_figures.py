# SPDX-License-Identifier: MIT
"""Draws the figure and prints the table of docs/depth-transfer.md from a depth-transfer store
(needs the 'sweep' and 'plot' extras). Without a store it runs the laptop preset first (at most
10 minutes on 2 idle cores; resumable: rerun the same command after a kill).
Usage: python docs/figures/depth_transfer_figures.py [STORE]   (default runs/depth-transfer-laptop)"""
import pathlib
import sys

from pydepth.plots.style import save_figure
from pydepth.plots.transfer import transfer_figure
from pydepth.sweep import depth_transfer, read_transfer_spec, read_transfer_table, transfer_spec
from pydepth.sweep.transfer_summary import curves, summary_lines

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE.parents[1] / "examples" / "data" / "corpus.txt"


def main(store: pathlib.Path) -> None:
    depth_transfer(transfer_spec(CORPUS, "laptop"), CORPUS, out=store, plots=False)  # resumes
    spec = read_transfer_spec(store)
    points = curves(read_transfer_table(store))
    for path in save_figure(transfer_figure(points, spec), HERE / "depth-transfer.png"):
        print(f"wrote {path}", file=sys.stderr)
    print("\n".join(summary_lines(points)))


if __name__ == "__main__":  # the guard keeps Dask's worker processes from rerunning the study
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path("runs/depth-transfer-laptop"))
