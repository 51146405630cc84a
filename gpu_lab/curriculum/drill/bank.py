"""The interview question bank: loading, filtering and validation.

The questions live in ``bank.yaml`` next to this module (package data): a YAML list of
mappings with the keys in ``REQUIRED_KEYS`` and optionally ``see_also``. ``validate_bank``
checks any such list and returns every problem as one line; the shipped bank must
return none (``tests/curriculum/test_drill.py``).

A question's ``lesson`` is the notebook that shows its answer, and ``shows`` lists 1-3 key
terms of that answer. With a lessons folder to read, ``validate_bank`` checks that the
notebook's text (the sources of all its cells, markdown and code) contains every term, so a
citation cannot silently point at a lesson without the material.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from ...errors import BankError

BANK_PATH = Path(__file__).with_name("bank.yaml")

# Topic keys in teaching order, with the title a person reads.
TOPICS: dict[str, str] = {
    "device-plugins": "Device plugins",
    "mig": "MIG",
    "sharing": "Time-slicing and MPS",
    "placement": "Placement: bin packing, taints, affinity, profiles",
    "autoscaling-cost": "Autoscaling and cost",
    "gang-queueing": "Gang scheduling and queueing (Kueue, Workload API)",
    "utilisation": "GPU utilisation and DCGM",
    "dra": "Dynamic Resource Allocation",
    "troubleshooting": "Troubleshooting",
}
LEVELS: tuple[str, ...] = ("basic", "intermediate", "advanced")

REQUIRED_KEYS: tuple[str, ...] = ("id", "topic", "level", "question", "answer", "follow_ups", "lesson",
                                  "shows")
OPTIONAL_KEYS: tuple[str, ...] = ("see_also",)
# Exactly what ``gpu-lab drill export --json`` writes: the question and its answer, not the
# bank's bookkeeping (``shows`` is for checking the lesson, ``see_also`` is optional).
EXPORT_KEYS: tuple[str, ...] = tuple(k for k in REQUIRED_KEYS if k != "shows")

_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_LESSON = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")
_SEE_ALSO = re.compile(r"^\d\d_[a-z0-9_]+$")
# The repository's lessons/ folder (absent when gpu_lab is installed from a wheel).
REPO_LESSONS = Path(__file__).resolve().parents[3] / "lessons"


@dataclass(frozen=True)
class Question:
    """One interview question with its model answer."""

    id: str
    topic: str
    level: str
    question: str
    answer: str
    follow_ups: tuple[str, ...]
    lesson: str  # a notebook under lessons/ that shows the answer
    shows: tuple[str, ...]  # key terms of the answer that the lesson's text contains
    see_also: tuple[str, ...] = ()  # lesson slugs still to be written (plain text)

    @property
    def topic_title(self) -> str:
        return TOPICS.get(self.topic, self.topic)

    @property
    def level_rank(self) -> int:
        """0 basic, 1 intermediate, 2 advanced."""
        return LEVELS.index(self.level)

    def to_dict(self) -> dict[str, Any]:
        """The export form: exactly ``EXPORT_KEYS`` (``shows`` and ``see_also`` are left out)."""
        return {
            "id": self.id,
            "topic": self.topic,
            "level": self.level,
            "question": self.question,
            "answer": self.answer,
            "follow_ups": list(self.follow_ups),
            "lesson": self.lesson,
        }


def _entries(data: Any) -> list[Any] | None:
    if isinstance(data, Mapping) and "questions" in data:
        data = data["questions"]
    return data if isinstance(data, list) else None


_DEFAULT = object()


def validate_bank(data: Any, lessons_dir: Path | str | None | object = _DEFAULT) -> list[str]:
    """Every problem in a parsed bank, one line each; ``[]`` when it is valid.

    ``data`` is a list of question mappings (or ``{"questions": [...]}``). Checks: missing
    and unknown keys, unknown topic or level, duplicate or malformed ids, empty question
    or answer, 1-3 non-empty follow-ups, the lesson's file name, 1-3 non-empty ``shows``
    terms, and, with a ``lessons_dir``, that the lesson exists there and that its text
    mentions every ``shows`` term (case-insensitive, any run of whitespace matching any
    other). By default ``lessons_dir`` is the repository's ``lessons/`` folder when it
    exists (a source checkout); pass ``None`` to skip the checks that read lessons.
    """
    entries = _entries(data)
    if entries is None:
        return [f"the bank must be a list of questions, got {type(data).__name__}"]
    if lessons_dir is _DEFAULT:
        lessons_dir = REPO_LESSONS if REPO_LESSONS.is_dir() else None
    folder = Path(lessons_dir) if isinstance(lessons_dir, (str, os.PathLike)) else None
    errors: list[str] = []
    seen: dict[str, int] = {}
    texts: dict[str, str | None] = {}  # lesson file name -> its normalised text (None: unreadable)
    for i, q in enumerate(entries):
        where = f"question {i + 1}"
        if not isinstance(q, Mapping):
            errors.append(f"{where}: must be a mapping, got {type(q).__name__}")
            continue
        qid = q.get("id")
        if isinstance(qid, str) and qid:
            where = f"question {i + 1} ({qid})"
        missing = [k for k in REQUIRED_KEYS if k not in q]
        if missing:
            errors.append(f"{where}: missing key(s) {', '.join(missing)}")
        unknown = sorted(str(k) for k in q if k not in REQUIRED_KEYS + OPTIONAL_KEYS)
        if unknown:
            errors.append(f"{where}: unknown key(s) {', '.join(unknown)}")
        if "id" in q:
            if not isinstance(qid, str) or not _SLUG.match(qid):
                errors.append(f"{where}: id {qid!r} is not a slug (lower-case words joined by -)")
            elif qid in seen:
                errors.append(f"{where}: duplicate id {qid!r} (first used by question {seen[qid] + 1})")
            else:
                seen[qid] = i
        if "topic" in q and q["topic"] not in TOPICS:
            errors.append(f"{where}: unknown topic {q['topic']!r} (known: {', '.join(TOPICS)})")
        if "level" in q and q["level"] not in LEVELS:
            errors.append(f"{where}: unknown level {q['level']!r} (known: {', '.join(LEVELS)})")
        for key in ("question", "answer"):
            if key in q and (not isinstance(q[key], str) or not q[key].strip()):
                errors.append(f"{where}: empty {key}")
        if "follow_ups" in q:
            fu = q["follow_ups"]
            if (not isinstance(fu, list) or not 1 <= len(fu) <= 3
                    or not all(isinstance(f, str) and f.strip() for f in fu)):
                errors.append(f"{where}: follow_ups must be a list of 1-3 non-empty questions")
        lesson_text: str | None = None
        if "lesson" in q:
            lesson = q["lesson"]
            if not isinstance(lesson, str) or not _LESSON.match(lesson):
                errors.append(f"{where}: lesson {lesson!r} is not a notebook name like 01_device_plugin.ipynb")
            elif folder is not None and not (folder / lesson).is_file():
                errors.append(f"{where}: lesson file missing: lessons/{lesson}")
            elif folder is not None:
                if lesson not in texts:
                    texts[lesson] = _lesson_text(folder / lesson)
                lesson_text = texts[lesson]
                if lesson_text is None:
                    errors.append(f"{where}: lesson lessons/{lesson} is not a readable notebook (JSON with cells)")
        if "shows" in q:
            shows = q["shows"]
            if (not isinstance(shows, list) or not 1 <= len(shows) <= 3
                    or not all(isinstance(t, str) and t.strip() for t in shows)):
                errors.append(f"{where}: shows must be a list of 1-3 non-empty key terms the lesson contains")
            elif lesson_text is not None:
                for term in shows:
                    if _normalise(term) not in lesson_text:
                        errors.append(f"{where}: lessons/{q['lesson']} does not mention {term!r}")
        if "see_also" in q:
            sa = q["see_also"]
            if not isinstance(sa, list) or not all(isinstance(s, str) and _SEE_ALSO.match(s) for s in sa):
                errors.append(f"{where}: see_also must be a list of lesson slugs like 07_gang_scheduling")
    return errors


def _normalise(text: str) -> str:
    """Case-folded, with every run of whitespace as one space: line breaks in a markdown
    cell must not hide a term."""
    return " ".join(text.split()).casefold()


def _lesson_text(path: Path) -> str | None:
    """A notebook's cell sources (markdown and code), joined and normalised; None when the
    file is not a notebook."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    cells = nb.get("cells") if isinstance(nb, Mapping) else None
    if not isinstance(cells, list):
        return None
    parts = []
    for cell in cells:
        source = cell.get("source", "") if isinstance(cell, Mapping) else ""
        parts.append("".join(map(str, source)) if isinstance(source, list) else str(source))
    return _normalise("\n".join(parts))


def parse_bank(text: str) -> Any:
    """Parse bank YAML (with libyaml's C loader when present)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as e:
        raise BankError(f"the question bank is not valid YAML: {e}") from None


def load_bank(path: Path | str | None = None, *, lessons_dir: Path | str | None = None) -> list[Question]:
    """Read and validate a bank file (the shipped one by default); raises ``BankError``.

    The checks that read lessons (the file exists, its text mentions every ``shows`` term)
    are off unless ``lessons_dir`` is given: loading must work in an installed package,
    where no lessons/ folder exists.
    """
    source = Path(path) if path is not None else BANK_PATH
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as e:
        raise BankError(f"cannot read the question bank {source}: {e.strerror or e}") from None
    data = parse_bank(text)
    errors = validate_bank(data, lessons_dir)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise BankError(f"{source.name}: {errors[0]}{more}")
    return [_question(q) for q in _entries(data) or ()]  # validate_bank refused a non-list


def _question(q: Mapping[str, Any]) -> Question:
    return Question(
        id=q["id"], topic=q["topic"], level=q["level"],
        question=" ".join(q["question"].split()), answer=" ".join(q["answer"].split()),
        follow_ups=tuple(" ".join(f.split()) for f in q["follow_ups"]),
        lesson=q["lesson"], shows=tuple(q["shows"]), see_also=tuple(q.get("see_also") or ()),
    )


@cache
def _shipped() -> tuple[Question, ...]:
    return tuple(load_bank())


def _check_choice(value: str | Iterable[str] | None, known: Iterable[str], what: str) -> set[str] | None:
    if value is None:
        return None
    wanted = {value} if isinstance(value, str) else set(value)
    known = tuple(known)
    bad = sorted(wanted - set(known))
    if bad:
        raise BankError(f"unknown {what} {', '.join(map(repr, bad))} (known: {', '.join(known)})")
    return wanted


def questions(topic: str | Iterable[str] | None = None,
              level: str | Iterable[str] | None = None) -> list[Question]:
    """The shipped questions, optionally only some topics and/or levels, in bank order.

    >>> len(questions(topic="mig", level="basic")) >= 1
    True
    """
    topics_ = _check_choice(topic, TOPICS, "topic")
    levels_ = _check_choice(level, LEVELS, "level")
    return [q for q in _shipped()
            if (topics_ is None or q.topic in topics_) and (levels_ is None or q.level in levels_)]


def topics() -> tuple[str, ...]:
    """Topic keys, in teaching order."""
    return tuple(TOPICS)


def levels() -> tuple[str, ...]:
    """Levels, easiest first: basic, intermediate, advanced."""
    return LEVELS


def get(question_id: str) -> Question:
    """One shipped question by id."""
    for q in _shipped():
        if q.id == question_id:
            return q
    raise BankError(f'no question with id "{question_id}"')
