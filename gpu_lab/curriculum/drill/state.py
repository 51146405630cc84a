"""The drill's state, without any frontend: a flashcard deck and a timed mock interview.

The widgets in ``widgets.py`` only draw these objects and forward clicks to them, so
everything that can go wrong (picking cards, scoring, timing) is tested in plain Python
with an injected clock.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...errors import DrillError
from .bank import LEVELS, TOPICS, Question

# Self-scores and the points each is worth.
MARKS: dict[str, float] = {"got": 1.0, "partly": 0.5, "missed": 0.0}
MARK_LABELS: dict[str, str] = {"got": "Got it", "partly": "Partly", "missed": "Missed", "skipped": "Skipped"}


@dataclass(frozen=True)
class TopicScore:
    topic: str
    asked: int
    got: int
    partly: int
    missed: int
    skipped: int
    points: float

    @property
    def percent(self) -> float:
        return 100.0 * self.points / self.asked if self.asked else 0.0


def _check_mark(mark: str) -> str:
    if mark not in MARKS:
        raise DrillError(f'unknown self-score "{mark}" (choose from {", ".join(MARKS)})')
    return mark


def _topic_scores(cards: Sequence[Question], marks: Sequence[str | None]) -> list[TopicScore]:
    rows = []
    for topic in TOPICS:
        picked = [m or "skipped" for q, m in zip(cards, marks) if q.topic == topic]
        if not picked:
            continue
        rows.append(TopicScore(topic, len(picked), picked.count("got"), picked.count("partly"),
                               picked.count("missed"), picked.count("skipped"),
                               sum(MARKS.get(m, 0.0) for m in picked)))
    return rows


class QuizState:
    """A flashcard deck: question, reveal, self-score, next; a per-topic summary at the end.

    ``pool`` are the candidate questions; ``n`` of them are drawn (all when fewer), in a
    random order fixed by ``seed``.
    """

    def __init__(self, pool: Sequence[Question], n: int = 10, seed: int | None = None):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DrillError(f"n must be a positive number of questions, got {n!r}")
        if not pool:
            raise DrillError("no questions match the chosen topic and level")
        rng = random.Random(seed)
        self.cards: tuple[Question, ...] = tuple(rng.sample(list(pool), min(n, len(pool))))
        self.marks: list[str | None] = [None] * len(self.cards)
        self.index = 0
        self.revealed = False

    # -- reading
    @property
    def done(self) -> bool:
        return self.index >= len(self.cards)

    @property
    def current(self) -> Question | None:
        return None if self.done else self.cards[self.index]

    @property
    def scored(self) -> bool:
        """Whether the current card has a self-score."""
        return not self.done and self.marks[self.index] is not None

    @property
    def points(self) -> float:
        return sum(MARKS[m] for m in self.marks if m is not None)

    @property
    def answered(self) -> int:
        return sum(m is not None for m in self.marks)

    def score_text(self) -> str:
        return f"{self.points:g} / {self.answered}" if self.answered else "0 / 0"

    def progress_text(self) -> str:
        if self.done:
            return f"done: {len(self.cards)} cards"
        return f"card {self.index + 1} of {len(self.cards)}"

    # -- acting
    def reveal(self) -> Question:
        if self.done:
            raise DrillError("the deck is finished")
        self.revealed = True
        return self.cards[self.index]

    def score(self, mark: str) -> None:
        """Self-score the current card (after revealing its answer); once per card."""
        _check_mark(mark)
        if self.done:
            raise DrillError("the deck is finished")
        if not self.revealed:
            raise DrillError("show the answer before scoring yourself")
        if self.marks[self.index] is not None:
            raise DrillError("this card is already scored")
        self.marks[self.index] = mark

    def next(self) -> Question | None:
        """Move on; a card left unscored counts as skipped (0 points)."""
        if self.done:
            raise DrillError("the deck is finished")
        self.index += 1
        self.revealed = False
        return self.current

    def summary(self) -> list[TopicScore]:
        """Per topic: how many cards, how each was scored, points (got 1, partly 0.5)."""
        return _topic_scores(self.cards, self.marks)


def _default_clock() -> float:
    return time.monotonic()


def interview_plan(pool: Sequence[Question], n: int, seed: int | None = None) -> tuple[Question, ...]:
    """``n`` questions across topics, difficulty rising: basic first, advanced last.

    Levels are spread evenly over the slots (for 6: 2 basic, 2 intermediate, 2 advanced);
    topics rotate in a random order so no topic repeats before every topic had a turn.
    Where a topic has no question at a slot's level the nearest level is used.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise DrillError(f"n must be a positive number of questions, got {n!r}")
    rng = random.Random(seed)
    left = list(pool)
    rng.shuffle(left)
    topic_order = [t for t in TOPICS if any(q.topic == t for q in left)]
    rng.shuffle(topic_order)
    n = min(n, len(left))
    picked: list[Question] = []
    for slot in range(n):
        want = min(len(LEVELS) - 1, slot * len(LEVELS) // n)
        candidates = []
        for k in range(len(topic_order)):
            topic = topic_order[(slot + k) % len(topic_order)] if topic_order else None
            candidates = [q for q in left if q.topic == topic]
            if candidates:
                break
        if not candidates:
            candidates = left
        best = min(candidates, key=lambda q: abs(q.level_rank - want))
        picked.append(best)
        left.remove(best)
    # Rising difficulty even where a topic lacked the slot's level.
    return tuple(sorted(picked, key=lambda q: q.level_rank))


@dataclass(frozen=True)
class AnswerTime:
    """One question of a mock interview, as the final report shows it."""

    number: int
    question: Question
    seconds: float | None  # from showing the question to revealing the answer
    budget: float
    mark: str | None

    @property
    def over(self) -> bool:
        return self.seconds is not None and self.seconds > self.budget


class MockInterview:
    """A timed mock interview: ``n`` questions in ``minutes``, each with an equal time budget.

    ``start()`` shows the first question and starts its clock; ``reveal()`` stops it (the
    time to answer out loud); ``score(mark)`` self-scores; ``next()`` starts the next
    question's clock. ``clock`` returns seconds (``time.monotonic`` by default; tests
    inject a fake one).
    """

    def __init__(self, pool: Sequence[Question], minutes: float = 20, n: int = 6,
                 seed: int | None = None, clock: Callable[[], float] | None = None):
        if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not minutes > 0:
            raise DrillError(f"minutes must be a positive number, got {minutes!r}")
        if not pool:
            raise DrillError("no questions to interview with")
        self.cards = interview_plan(pool, n, seed)
        self.minutes = float(minutes)
        self.budget = self.minutes * 60 / len(self.cards)  # seconds per question
        self.clock = clock or _default_clock
        self.index = -1  # -1: not started
        self.started_at: list[float | None] = [None] * len(self.cards)
        self.revealed_at: list[float | None] = [None] * len(self.cards)
        self.marks: list[str | None] = [None] * len(self.cards)
        self.finished_at: float | None = None

    # -- reading
    @property
    def started(self) -> bool:
        return self.index >= 0

    @property
    def done(self) -> bool:
        return self.index >= len(self.cards)

    @property
    def current(self) -> Question | None:
        return self.cards[self.index] if self.started and not self.done else None

    @property
    def revealed(self) -> bool:
        return self.current is not None and self.revealed_at[self.index] is not None

    def elapsed(self) -> float:
        """Seconds spent on the current question (frozen once its answer is revealed)."""
        if self.current is None:
            return 0.0
        end = self.revealed_at[self.index]
        start = self.started_at[self.index]
        assert start is not None  # the current card was started when it became current
        return (end if end is not None else self.clock()) - start

    def time_left(self) -> float:
        """Seconds left of the current question's budget (negative when over)."""
        return self.budget - self.elapsed()

    def total_elapsed(self) -> float:
        """Seconds since the interview started (until it finished)."""
        if not self.started:
            return 0.0
        end = self.finished_at if self.finished_at is not None else self.clock()
        start = self.started_at[0]
        assert start is not None  # the first card starts with the drill
        return end - start

    def total_left(self) -> float:
        return self.minutes * 60 - self.total_elapsed()

    @property
    def points(self) -> float:
        return sum(MARKS[m] for m in self.marks if m is not None)

    # -- acting
    def start(self) -> Question:
        if self.started:
            raise DrillError("the interview has already started")
        self.index = 0
        self.started_at[0] = self.clock()
        return self.cards[0]

    def reveal(self) -> Question:
        q = self._need_current()
        if self.revealed_at[self.index] is None:
            self.revealed_at[self.index] = self.clock()
        return q

    def score(self, mark: str) -> None:
        _check_mark(mark)
        self._need_current()
        if self.revealed_at[self.index] is None:
            raise DrillError("reveal the model answer before scoring yourself")
        if self.marks[self.index] is not None:
            raise DrillError("this question is already scored")
        self.marks[self.index] = mark

    def next(self) -> Question | None:
        """The next question (its clock starts now); None and finished after the last."""
        self._need_current()
        now = self.clock()
        if self.revealed_at[self.index] is None:  # moved on without revealing: time stops here
            self.revealed_at[self.index] = now
        self.index += 1
        if self.done:
            self.finished_at = now
            return None
        self.started_at[self.index] = now
        return self.cards[self.index]

    def _need_current(self) -> Question:
        if not self.started:
            raise DrillError("start the interview first")
        if self.done:
            raise DrillError("the interview is over")
        return self.cards[self.index]

    # -- reporting
    def report(self) -> list[AnswerTime]:
        rows = []
        for i, q in enumerate(self.cards):
            start, end = self.started_at[i], self.revealed_at[i]
            seconds = None if start is None or end is None else end - start
            rows.append(AnswerTime(i + 1, q, seconds, self.budget, self.marks[i]))
        return rows

    def summary(self) -> list[TopicScore]:
        return _topic_scores(self.cards, self.marks)


def clock_text(seconds: float) -> str:
    """``m:ss``, with a leading ``-`` when over time."""
    sign = "-" if seconds < 0 else ""
    s = int(round(abs(seconds)))
    return f"{sign}{s // 60}:{s % 60:02d}"
