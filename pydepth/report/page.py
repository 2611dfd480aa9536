# SPDX-License-Identifier: MIT
"""One self-contained HTML page: inline CSS, figures inline as SVG, no script and no external
asset, so the file opens offline and can be mailed or attached as it is."""
from __future__ import annotations

import html
import io
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["Section", "figure_html", "page", "pre_html", "table_html"]


@dataclass(frozen=True)
class Section:
    """A titled part of the page; ``body`` is HTML this package built (already escaped)."""

    title: str
    body: str


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 78rem; padding: 0 1rem; color: #1b1b1b; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } h2 { font-size: 1.25rem; margin-top: 2rem;
     border-bottom: 1px solid #ccc; padding-bottom: 0.2rem; }
.kind { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: right; }
th { background: #f2f2f2; } td:first-child, th:first-child, td:nth-child(2), th:nth-child(2) { text-align: left; }
pre { background: #f7f7f7; padding: 0.6rem; overflow-x: auto; font-size: 0.85rem; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #444; font-size: 0.9rem; }
.pass { color: #1a7f37; font-weight: 600; } .fail { color: #b42318; font-weight: 600; }
"""


def table_html(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An HTML table of ``rows`` under ``header``; every cell is escaped text."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def pre_html(text: str) -> str:
    """Preformatted text (a summary file, a JSON specification), escaped."""
    return f"<pre>{html.escape(text)}</pre>"


def figure_html(fig: Any, caption: str) -> str:
    """A matplotlib figure as inline SVG (text kept as text, ids stable) with its caption; closes it."""
    import matplotlib
    from matplotlib import pyplot as plt
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "pydepth-report"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]  # the XML prolog and DOCTYPE are not allowed inside HTML
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"


def page(title: str, kind: str, sections: Sequence[Section]) -> str:
    """The whole document."""
    parts = [f"<section><h2>{html.escape(s.title)}</h2>{s.body}</section>" for s in sections]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p class=\"kind\">{html.escape(kind)}</p>"
            + "".join(parts) + "</body></html>\n")
