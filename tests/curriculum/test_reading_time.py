"""Each lesson reads in at most 25 minutes, says so at its top, and links its terms of art to
lessons/GLOSSARY.md.

The reading-time rule (``main_text_minutes``): a lesson's main text takes

    minutes = prose words outside <details> / 200 + code cells' non-blank lines / 20

*Prose words* are the words of the markdown cells with fenced code blocks, HTML tags and link
targets left out (a link counts its text only); ``<details>`` sections ("Under the hood: ...")
are collapsed by default and do not count. A code cell's non-blank lines count 20 to the minute.

The first markdown cell states the figure ("*Reading time: about N minutes ...*"); it must be
within 3 minutes of the computed one. Every glossary anchor a lesson links must exist, every
glossary entry must link an existing lesson, and the terms that the lessons once used before
introducing them (PreScore, Permit, GFD, cohort, makespan) must link to the glossary at their
first use in each lesson that uses them.

``python tests/curriculum/test_reading_time.py`` prints the figures per lesson.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LESSONS = REPO / "lessons"
GLOSSARY = LESSONS / "GLOSSARY.md"
LESSON_FILES = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))
MAX_MINUTES = 25
WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 20

_DETAILS = re.compile(r"<details>.*?</details>", re.S)
_FENCE = re.compile(r"```.*?```", re.S)
_WORD = re.compile(r"[A-Za-z0-9][\w'’./:=-]*")
# Terms whose first use in a lesson must link the glossary: term -> (pattern, anchor).
FIRST_USE_TERMS = {
    "PreScore": (r"PreScore", "prescore"),
    "Permit": (r"Permit", "permit"),
    "GFD": (r"GFD", "gfd"),
    "cohort": (r"(?i:cohorts?)", "cohort"),
    "makespan": (r"(?i:makespan)(?:_s)?", "makespan"),
}


def _cells(path: Path) -> list[dict]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [{"cell_type": c["cell_type"], "source": "".join(c["source"])} for c in nb["cells"]]


def prose_words(markdown: str) -> int:
    """Words of prose in ``markdown``: fenced code, HTML tags and link targets left out."""
    text = _FENCE.sub(" ", markdown)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return len(_WORD.findall(text))


def lesson_counts(path: Path) -> dict[str, int]:
    """Main-text prose words, words inside <details>, and non-blank code lines of a lesson."""
    main = details = code = 0
    for cell in _cells(path):
        src = cell["source"]
        if cell["cell_type"] == "markdown":
            details += sum(prose_words(d) for d in _DETAILS.findall(src))
            main += prose_words(_DETAILS.sub(" ", src))
        elif cell["cell_type"] == "code":
            code += sum(1 for line in src.splitlines() if line.strip())
    return {"main_words": main, "details_words": details, "code_lines": code}


def main_text_minutes(path: Path) -> float:
    """The reading-time rule of the module docstring."""
    c = lesson_counts(path)
    return c["main_words"] / WORDS_PER_MINUTE + c["code_lines"] / CODE_LINES_PER_MINUTE


def stated_minutes(path: Path) -> int | None:
    first = next(c["source"] for c in _cells(path) if c["cell_type"] == "markdown")
    m = re.search(r"Reading time: about (\d+) minutes?", first)
    return int(m[1]) if m else None


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower-case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def glossary_entries() -> dict[str, str]:
    """anchor -> the entry's text, for every '### ' heading of GLOSSARY.md."""
    text = GLOSSARY.read_text(encoding="utf-8")
    parts = re.split(r"^### (.+)$", text, flags=re.M)
    return {github_anchor(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def _prose(markdown: str) -> str:
    """``markdown`` with fenced code and headings blanked (same length, so offsets hold)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m[0])  # noqa: E731
    text = _FENCE.sub(blank, markdown)
    return re.sub(r"^#.*$", blank, text, flags=re.M)


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_main_text_reads_in_at_most_25_minutes(path):
    minutes = main_text_minutes(path)
    assert minutes <= MAX_MINUTES, (
        f"{path.name}: main text reads in {minutes:.1f} min ({lesson_counts(path)}); "
        f"move implementation detail into <details> 'Under the hood' sections")


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_stated_reading_time_matches_the_rule(path):
    stated = stated_minutes(path)
    assert stated is not None, f"{path.name}: first markdown cell states no '*Reading time: about N minutes'"
    computed = main_text_minutes(path)
    assert abs(stated - computed) <= 3, f"{path.name}: states {stated} min, the rule gives {computed:.1f}"


def test_every_glossary_link_from_a_lesson_exists():
    anchors = set(glossary_entries())
    assert len(anchors) >= 40
    missing = []
    for path in LESSON_FILES:
        for cell in _cells(path):
            for anchor in re.findall(r"\]\(GLOSSARY\.md#([^)\s]+)\)", cell["source"]):
                if anchor not in anchors:
                    missing.append(f"{path.name}: #{anchor}")
    assert missing == []


def test_every_glossary_entry_links_an_existing_lesson():
    for anchor, text in glossary_entries().items():
        targets = re.findall(r"\]\(([^)#\s]+\.ipynb)\)", text)
        assert targets, f"GLOSSARY.md#{anchor} links no lesson"
        for target in targets:
            assert (LESSONS / target).is_file(), f"GLOSSARY.md#{anchor} links missing {target}"


def test_every_lesson_links_the_glossary():
    for path in LESSON_FILES:
        assert any("](GLOSSARY.md#" in c["source"] for c in _cells(path)), path.name


@pytest.mark.parametrize("term", sorted(FIRST_USE_TERMS))
def test_terms_link_the_glossary_at_first_use(term):
    pattern, anchor = FIRST_USE_TERMS[term]
    link = re.compile(r"\[[^\]]*\]\(GLOSSARY\.md#" + re.escape(anchor) + r"\)")
    used = []
    for path in LESSON_FILES:
        text = "\n\n".join(c["source"] for c in _cells(path) if c["cell_type"] == "markdown")
        prose = _prose(text)
        first = re.search(r"(?<![\w-])" + pattern + r"(?![\w-])", prose)
        if not first:
            continue
        used.append(path.stem)
        linked = any(m.start() <= first.start() < m.end() for m in link.finditer(text))
        assert linked, f"{path.name}: first use of {term!r} does not link GLOSSARY.md#{anchor}"
    assert used, f"no lesson uses {term!r}"


if __name__ == "__main__":
    for path in LESSON_FILES:
        c = lesson_counts(path)
        print(f"{path.stem:28} main {c['main_words']:5} words, under the hood {c['details_words']:4}, "
              f"code {c['code_lines']:4} lines: {main_text_minutes(path):5.1f} min "
              f"(stated {stated_minutes(path)})", file=sys.stdout)
