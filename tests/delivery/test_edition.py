"""The static reading edition: lessons executed on the sim, rendered to HTML that a
browser can read offline. Checked for broken links, missing images and anything a page
would fetch from the network (a CDN script, a remote stylesheet or image)."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from delivery_support import LESSONS

from gpu_lab import cli, edition

pytestmark = pytest.mark.delivery


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href") is not None:
            self.links.append(a["href"])
        if tag == "img":
            self.images.append(a.get("src") or "")


def _parse(path: Path) -> _Refs:
    refs = _Refs()
    refs.feed(path.read_text(encoding="utf-8"))
    return refs


def check_site(out: Path, lessons: list[Path]) -> dict[str, int]:
    """Every page: links resolve inside the site, images are embedded and decode, nothing
    is loaded from the network. Returns the number of images per page."""
    pages = {p.stem + ".html" for p in lessons}
    assert {p.name for p in out.glob("*.html")} == pages | {"index.html"}
    index = _parse(out / "index.html")
    assert [h for h in index.links] == [p.stem + ".html" for p in lessons]
    parsed = {name: _parse(out / name) for name in pages | {"index.html"}}
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
        images[name] = len(refs.images)
    return images


def test_two_lessons_build_offline(tmp_path, capsys):
    chosen = [p for p in LESSONS if p.stem.startswith(("00_", "10_"))]
    assert len(chosen) == 2
    assert cli.main(["edition", "--out", str(tmp_path), "--lessons", "00", "10"]) == 0
    assert "wrote" in capsys.readouterr().out
    images = check_site(tmp_path, chosen)
    assert images["00_start_here.html"] >= 1  # the occupancy charts, as SVG images
    drill = (tmp_path / "10_interview.html").read_text(encoding="utf-8")
    assert "Flashcards" in drill  # the drill widget's static rendering
    # a lesson not in this edition is named as a repository file, not a dangling link
    assert "01_device_plugin.ipynb</code> in the repository" in (
        tmp_path / "00_start_here.html").read_text(encoding="utf-8")


def test_unknown_lesson_is_one_line_error(tmp_path, capsys):
    assert edition.main(["--out", str(tmp_path), "--lessons", "99_nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith('error: no lesson "99_nope"') and "00_start_here" in err


def test_remote_references_are_found():
    page = ('<script type="module">await import("https://cdn.x/m.mjs")</script>'
            '<img src="https://x/y.png"><link rel="stylesheet" href="//cdn/x.css">'
            '<style>@import url("https://f/a.css")</style><a href="https://cite.example">ok</a>')
    assert edition.remote_references(page) == [
        "https://x/y.png", "//cdn/x.css", "https://f/a.css", "https://cdn.x/m.mjs"]
    assert edition.remote_references(edition._strip_remote(page).replace(
        '<img src="https://x/y.png">', "")) == ["//cdn/x.css", "https://f/a.css"]


@pytest.mark.slow
def test_full_edition(tmp_path):
    pages = edition.build(tmp_path, LESSONS, progress=print)
    images = check_site(tmp_path, LESSONS)
    for page in pages:
        print(f"{page.html_name}: {page.seconds:.1f}s, {images[page.html_name]} images")
        assert images[page.html_name] >= 1, f"{page.html_name} has no chart"
    links = _parse(tmp_path / "00_start_here.html").links
    assert "01_device_plugin.html" in links  # lesson-to-lesson links point at pages
