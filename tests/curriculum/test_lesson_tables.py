"""Lessons whose tables carry the scheduler's messages show them whole: pandas cuts a cell at
50 characters by default, which hides the reason a pod is pending."""

import json
from pathlib import Path

LESSONS = sorted((Path(__file__).resolve().parents[2] / "lessons").glob("[0-9][0-9]_*.ipynb"))
SETTING = 'pd.set_option("display.max_colwidth", None)'


def _code(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def test_message_tables_are_shown_whole():
    showing = 0
    for lesson in LESSONS:
        cells = _code(lesson)
        shows = [i for i, src in enumerate(cells) if '"message"' in src]
        if not shows:
            continue
        showing += 1
        setting = [i for i, src in enumerate(cells) if SETTING in src]
        assert setting and setting[0] < shows[0], f"{lesson.name}: {SETTING} before code cell {shows[0]}"
    assert showing >= 8  # most lessons show a message column: the check has something to check
