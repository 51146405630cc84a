"""Helpers shared by the delivery tests (Binder, the real browser, the static edition).

They need tools beyond the package (repo2docker, Chromium, Playwright). Locally a missing
tool skips the test with the command that installs it; in CI (``CI=true``) it fails, so a
CI machine without the tool cannot pass by skipping.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from gpu_lab import edition

REPO = Path(__file__).resolve().parents[2]
LESSONS = sorted((REPO / "lessons").glob("[0-9][0-9]_*.ipynb"))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(ok: bool, what: str, fix: str) -> None:
    """Skip locally, fail loudly in CI, when a tool the test needs is missing."""
    if ok:
        return
    message = f"{what} is missing: {fix}"
    if in_ci():
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


def venv_tool(name: str) -> str | None:
    """A console script of this environment, else one on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() else shutil.which(name)


def artifacts_dir() -> Path:
    """Where screenshots and reports go: $GPU_LAB_ARTIFACTS, else a temporary folder."""
    root = os.environ.get("GPU_LAB_ARTIFACTS")
    path = Path(root) if root else Path(tempfile.gettempdir()) / "gpu-lab-artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


# ------------------------------------------------------------------ the static edition
class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.ids: set[str] = set()
        self.details: list[int] = []  # per <details>: the elements after its <summary>
        self._open: list[int] = []
        self._in_summary = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "details":
            self._open.append(0)
        elif tag == "summary":
            self._in_summary = True
        elif self._open and not self._in_summary:
            self._open[-1] += 1
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href") is not None:
            self.links.append(a["href"])
        if tag == "img":
            self.images.append(a.get("src") or "")

    def handle_endtag(self, tag):
        if tag == "summary":
            self._in_summary = False
        elif tag == "details" and self._open:
            self.details.append(self._open.pop())


def parse_page(path: Path) -> _Refs:
    refs = _Refs()
    refs.feed(path.read_text(encoding="utf-8"))
    return refs


def check_site(out: Path, lessons: list[Path]) -> dict[str, int]:
    """Every page: links resolve inside the site, images are embedded and decode, nothing
    is loaded from the network. Returns the number of images per page."""
    pages = {p.stem + ".html" for p in lessons}
    glossary = bool(lessons) and (lessons[0].parent / edition.GLOSSARY).is_file()
    if glossary:  # the lessons link its entries: the edition has it as a page
        pages.add(edition.GLOSSARY_PAGE)
    assert {p.name for p in out.glob("*.html")} == pages | {"index.html"}
    index = parse_page(out / "index.html")
    assert [h for h in index.links] == [p.stem + ".html" for p in lessons] + (
        [edition.GLOSSARY_PAGE] if glossary else [])
    parsed = {name: parse_page(out / name) for name in pages | {"index.html"}}
    images = {}
    for name, refs in parsed.items():
        text = (out / name).read_text(encoding="utf-8")
        assert edition.remote_references(text) == [], f"{name} loads from the network"
        assert "unpkg.com" not in text and "cdn.jsdelivr" not in text, name
        assert "application/vnd.jupyter.widget-view+json" not in text, name
        for href in refs.links:
            url = urlsplit(href)
            if url.scheme in ("http", "https", "mailto"):
                continue  # citations: hyperlinks a reader may follow, never fetched
            assert not url.scheme and not url.netloc, f"{name}: odd link {href}"
            target = unquote(url.path) or name
            assert target in parsed, f"{name}: broken link {href}"
            if url.fragment:
                # browsers match the fragment as written, then percent-decoded
                ids = parsed[target].ids
                assert {url.fragment, unquote(url.fragment)} & ids, f"{name}: no anchor {href}"
        for src in refs.images:
            m = re.match(r"data:image/(png|svg\+xml|jpeg|gif)(;base64)?,(.*)", src, re.S)
            assert m, f"{name}: image not embedded: {src[:80]!r}"
            payload = base64.b64decode(m.group(3)) if m.group(2) else unquote(m.group(3)).encode()
            assert len(payload) > 200, f"{name}: empty image"
        # an Under the hood section holds its text, not an empty box with the text after it
        assert all(refs.details), f"{name}: {refs.details.count(0)} empty <details>"
        images[name] = len(refs.images)
    return images
