# SPDX-License-Identifier: MIT
"""mkdocs hooks of the documentation site (mkdocs.yml): the README and the guides that live
outside docs/ become pages, the API reference pages come from tools/api_reference.py, and every
relative link is rewritten to the page it names in the site, or to plain text when its target
(a script, a source file) is not part of the site."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Any, Optional

import api_reference  # this directory is on sys.path while mkdocs loads the hook

if TYPE_CHECKING:  # the rewriting is tested without mkdocs installed (tests/test_api_reference.py)
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

#: files outside docs/ that the site shows: repository path -> page path in the site
OUTSIDE = {
    "README.md": "index.md",
    "CONTRIBUTING.md": "contributing.md",
    "CHANGELOG.md": "changelog.md",
    "tests/README.md": "tests.md",
    "benchmarks/README.md": "benchmarks.md",
}
_FROM_SITE = {site: repo for repo, site in OUTSIDE.items()}
_LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")


def on_files(files: Files, config: MkDocsConfig, **kwargs: Any) -> Files:
    """Adds the pages from outside docs/ and the generated API reference."""
    from mkdocs.structure.files import File

    root = posixpath.dirname(config.config_file_path)
    for repo, site in OUTSIDE.items():
        files.append(File.generated(config, site, abs_src_path=posixpath.join(root, repo)))
    for name, text in api_reference.pages().items():
        files.append(File.generated(config, f"api/{name}", content=text))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files, **kwargs: Any) -> str:
    """Rewrites the relative links of a page written for the repository to the site's pages."""
    site_path = page.file.src_uri
    if site_path.startswith("api/"):
        return markdown  # generated for the site already
    repo_path = _FROM_SITE.get(site_path, "docs/" + site_path)
    # fenced code is left as it is: only prose holds links (odd pieces between fences are code)
    pieces = re.split(r"(^(?:```|~~~)[^\n]*\n.*?^(?:```|~~~)[ \t]*$)", markdown, flags=re.M | re.S)
    return "".join(
        p if i % 2 else _LINK.sub(lambda m: _rewrite(m, repo_path, site_path, files), p) for i, p in enumerate(pieces)
    )


def _rewrite(match: re.Match[str], repo_path: str, site_path: str, files: Files) -> str:
    bang, text, target = match.groups()
    if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return match.group(0)  # outside the repository, or within this page
    path, hash_, anchor = target.partition("#")
    in_site = _site_path(posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), path)), files)
    if in_site is None:  # not in the site: keep the words, name the repository path if they do not
        shown = posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), path))
        return text if shown in text or bang else f"{text} (`{shown}` in the repository)"
    relative = posixpath.relpath(in_site, posixpath.dirname(site_path) or ".")
    return f"{bang}[{text}]({relative}{hash_}{anchor})"


def _site_path(repo_target: str, files: Files) -> Optional[str]:
    """Where a repository file is in the site, or None when the site does not hold it."""
    if repo_target in OUTSIDE:
        return OUTSIDE[repo_target]
    if repo_target.startswith("docs/") and files.get_file_from_path(repo_target[len("docs/") :]) is not None:
        return repo_target[len("docs/") :]
    return None


def on_config(config: MkDocsConfig, **kwargs: Any) -> MkDocsConfig:
    """Appends the API reference to the navigation, one entry per generated page."""
    pages = [
        {"Overview": "api/index.md"},
        *({p: f"api/{api_reference.page_file(p)}"} for p in api_reference.public_packages()),
        {"Exceptions": f"api/{api_reference.EXCEPTIONS_PAGE}"},
    ]
    config.nav = [*(config.nav or []), {"API reference": pages}]
    return config
