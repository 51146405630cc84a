"""The drill's widgets: flashcards (``quiz``) and a timed mock interview (``mock_interview``).

A thin layer over ``state.QuizState`` and ``state.MockInterview``: buttons call the state,
then everything is redrawn from it. Where widgets cannot run (nbval, a static HTML
export, GitHub's viewer, no ipywidgets installed) the object still renders: its
``_repr_mimebundle_`` carries the widget view *and* a static version (HTML, Markdown and
plain text) with each question followed by its model answer in a collapsed block.

The mock interview's countdown ticks once a second on the kernel's asyncio loop (no
thread, nothing blocks); where no loop runs, the time left is still recomputed on every
click, and the report times each answer from the clicks.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Sequence
from typing import Any

from .bank import TOPICS, Question, questions
from .state import MARK_LABELS, MARKS, MockInterview, QuizState, TopicScore, clock_text

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
_SCORE_BUTTONS = (("got", "success"), ("partly", "warning"), ("missed", "danger"))


# ---------------------------------------------------------------- static rendering

def _md_escape(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", text)


def _answer_html(q: Question) -> str:
    follow = "".join(f"<li>{html.escape(f)}</li>" for f in q.follow_ups)
    see = (f" (more in the coming {', '.join(html.escape(s) for s in q.see_also)})"
           if q.see_also else "")
    return (f"<p>{html.escape(q.answer)}</p>"
            f"<p><b>Likely follow-ups</b></p><ul>{follow}</ul>"
            f'<p><b>Shown in</b> <a href="{html.escape(q.lesson)}">lessons/{html.escape(q.lesson)}</a>'
            f"{see}</p>")


def _tag(q: Question) -> str:
    return f"{TOPICS.get(q.topic, q.topic)} · {q.level}"


def static_html(cards: Sequence[Question], title: str, note: str = "") -> str:
    """Each question, then its model answer folded in a ``<details>`` block."""
    parts = [f"<h4>{html.escape(title)}</h4>"]
    if note:
        parts.append(f"<p><i>{html.escape(note)}</i></p>")
    parts.append("<ol>")
    for q in cards:
        parts.append(
            f"<li><p><small>{html.escape(_tag(q))} · <code>{html.escape(q.id)}</code></small><br>"
            f"{html.escape(q.question)}</p>"
            f"<details><summary>Model answer</summary>{_answer_html(q)}</details></li>")
    parts.append("</ol>")
    return "".join(parts)


def static_markdown(cards: Sequence[Question], title: str, note: str = "") -> str:
    lines = [f"#### {_md_escape(title)}", ""]
    if note:
        lines += [f"*{_md_escape(note)}*", ""]
    for i, q in enumerate(cards, 1):
        lines += [f"{i}. <small>{html.escape(_tag(q))}</small> {_md_escape(q.question)}", "",
                  f"<details><summary>Model answer</summary>{_answer_html(q)}</details>", ""]
    return "\n".join(lines)


def static_text(cards: Sequence[Question], title: str, note: str = "") -> str:
    """Questions first, model answers after all of them."""
    lines = [title] + ([note] if note else []) + [""]
    lines += [f"{i}. [{_tag(q)}] {q.question}" for i, q in enumerate(cards, 1)]
    lines += ["", "Model answers (try first):", ""]
    for i, q in enumerate(cards, 1):
        lines += [f"{i}. {q.answer}", f"   Follow-ups: {' / '.join(q.follow_ups)}",
                  f"   Shown in lessons/{q.lesson}", ""]
    return "\n".join(lines).rstrip() + "\n"


def summary_html(rows: Sequence[TopicScore]) -> str:
    head = "".join(f"<th>{h}</th>" for h in
                   ("topic", "asked", "got it", "partly", "missed", "skipped", "points", "%"))
    body = "".join(
        f"<tr><td>{html.escape(TOPICS.get(r.topic, r.topic))}</td><td>{r.asked}</td><td>{r.got}</td>"
        f"<td>{r.partly}</td><td>{r.missed}</td><td>{r.skipped}</td><td>{r.points:g}</td>"
        f"<td>{r.percent:.0f}</td></tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


# ---------------------------------------------------------------- shared widget plumbing

def _ipywidgets():
    try:
        import ipywidgets
    except ImportError:  # pragma: no cover - ipywidgets is in the lab and dev extras
        return None
    return ipywidgets


class _DrillView:
    """Common display logic: the widget (if any) plus the static fallback."""

    title = "Drill"
    state: Any  # each view's own: a QuizState or a MockInterview

    def __init__(self) -> None:
        self.widget: Any = None
        self.buttons: dict[str, Any] = {}

    @property
    def cards(self) -> tuple[Question, ...]:
        return self.state.cards

    def _note(self) -> str:
        return ""

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        bundle: dict[str, Any] = {}
        make = getattr(self.widget, "_repr_mimebundle_", None)
        if make is not None:
            bundle.update(make(include=include, exclude=exclude) or {})
        bundle["text/html"] = static_html(self.cards, self.title, self._note())
        bundle["text/markdown"] = static_markdown(self.cards, self.title, self._note())
        bundle["text/plain"] = static_text(self.cards, self.title, self._note())
        return bundle

    def _buttons(self, w, names: Sequence[tuple[str, str, str]]):
        for key, label, style in names:
            b = w.Button(description=label, button_style=style,
                         layout=w.Layout(width="auto"))
            b.on_click(lambda _b, key=key: self._clicked(key))
            self.buttons[key] = b
        return w.HBox(list(self.buttons.values()))

    def click(self, key: str) -> None:
        """Press a button by key (``reveal``, ``got``, ``partly``, ``missed``, ``next``, ``start``),
        as a click in the browser would; works without a frontend too."""
        button = self.buttons.get(key)
        if button is not None:
            button.click()
        else:
            self._clicked(key)

    def _clicked(self, key: str) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


# ---------------------------------------------------------------- flashcards

class Quiz(_DrillView):
    """Flashcards over a ``QuizState``: show answer, self-score, next, per-topic summary."""

    title = "Flashcards"
    state: QuizState

    def __init__(self, state: QuizState):
        super().__init__()
        self.state = state
        w = _ipywidgets()
        if w is None:
            return
        self.header = w.HTML()
        self.question = w.HTML()
        self.answer = w.HTML()
        row = self._buttons(w, [("reveal", "Show answer", "info"),
                                *[(k, MARK_LABELS[k], s) for k, s in _SCORE_BUTTONS],
                                ("next", "Next", "")])
        self.widget = w.VBox([self.header, self.question, self.answer, row],
                             layout=w.Layout(max_width="900px"))
        self._render()

    def _note(self) -> str:
        return (f"{len(self.cards)} cards. Answer out loud, then open the model answer "
                "and score yourself: got it 1, partly 0.5, missed 0.")

    def _clicked(self, key: str) -> None:
        s = self.state
        if key == "reveal" and not s.done:
            s.reveal()
        elif key in MARKS and s.revealed and not s.scored:
            s.score(key)
        elif key == "next" and not s.done:
            s.next()
        self._render()

    def _render(self) -> None:
        if self.widget is None:
            return
        s, b = self.state, self.buttons
        if s.done:
            self.header.value = f"<b>Done</b> · score {s.score_text()}"
            self.question.value = "<p><b>Per topic</b></p>" + summary_html(s.summary())
            self.answer.value = ""
            for button in b.values():
                button.layout.display = "none"
            return
        q = s.current
        assert q is not None  # started and not done
        self.header.value = (f"<b>{html.escape(_tag(q))}</b> · {s.progress_text()} · "
                             f"score {s.score_text()}")
        self.question.value = f"<p style='font-size:1.1em'>{html.escape(q.question)}</p>"
        self.answer.value = _answer_html(q) if s.revealed else ""
        b["reveal"].disabled = s.revealed
        for key in MARKS:
            b[key].disabled = not s.revealed or s.scored
        b["next"].description = "Finish" if s.index == len(s.cards) - 1 else "Next"


# ---------------------------------------------------------------- mock interview

class MockInterviewView(_DrillView):
    """A timed mock interview over a ``MockInterview``: countdown, self-score, final report."""

    title = "Mock interview"
    TICK_SECONDS = 1.0
    state: MockInterview

    def __init__(self, state: MockInterview):
        super().__init__()
        self.state = state
        self._tick_handle: asyncio.TimerHandle | None = None
        w = _ipywidgets()
        if w is None:
            return
        self.header = w.HTML()
        self.clock = w.HTML()
        self.question = w.HTML()
        self.answer = w.HTML()
        row = self._buttons(w, [("start", "Start the interview", "primary"),
                                ("reveal", "Show model answer", "info"),
                                *[(k, MARK_LABELS[k], s) for k, s in _SCORE_BUTTONS],
                                ("next", "Next question", "")])
        self.widget = w.VBox([self.header, self.clock, self.question, self.answer, row],
                             layout=w.Layout(max_width="900px"))
        self._render()

    def _note(self) -> str:
        s = self.state
        return (f"{len(s.cards)} questions in {s.minutes:g} minutes, about "
                f"{clock_text(s.budget)} each, easiest first. Answer out loud before opening "
                "the model answer.")

    def _clicked(self, key: str) -> None:
        s = self.state
        if key == "start" and not s.started:
            s.start()
        elif key == "reveal" and s.current is not None:
            s.reveal()
        elif key in MARKS and s.revealed and s.marks[s.index] is None:
            s.score(key)
        elif key == "next" and s.current is not None:
            s.next()
        self._render()
        self._schedule_tick()

    # A countdown on the kernel's event loop: one call a second while a question is open.
    def _schedule_tick(self) -> None:
        if self._tick_handle is not None or not self.state.started or self.state.done:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (plain Python, tests): time updates on clicks only
            return
        self._tick_handle = loop.call_later(self.TICK_SECONDS, self._tick)

    def _tick(self) -> None:
        self._tick_handle = None
        s = self.state
        if s.done or not s.started:
            return
        self._render_clock()
        if s.total_elapsed() < 2 * s.minutes * 60:  # an abandoned interview stops ticking
            self._schedule_tick()

    def stop(self) -> None:
        """Stop the countdown (it also stops by itself when the interview ends)."""
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None

    def _render_clock(self) -> None:
        if self.widget is None:
            return
        s = self.state
        if not s.started or s.done:
            self.clock.value = ""
            return
        left = s.time_left()
        colour = "#b00020" if left < 0 else ("#b36b00" if left < 30 else "inherit")
        frozen = " (answer shown: clock stopped)" if s.revealed else ""
        self.clock.value = (f"<span style='color:{colour}'><b>{clock_text(left)}</b> left of "
                            f"{clock_text(s.budget)} for this question{frozen}</span> · "
                            f"{clock_text(s.total_left())} left in the interview")

    def _render(self) -> None:
        if self.widget is None:
            return
        s, b = self.state, self.buttons
        if not s.started:
            self.header.value = f"<b>Mock interview</b> · {html.escape(self._note())}"
            self.question.value = ""
            self.answer.value = ""
            for key, button in b.items():
                button.layout.display = None if key == "start" else "none"
            self._render_clock()
            return
        b["start"].layout.display = "none"
        if s.done:
            self.header.value = (f"<b>Done</b> · {s.points:g} / {len(s.cards)} points in "
                                 f"{clock_text(s.total_elapsed())}")
            self.question.value = report_html(s)
            self.answer.value = ""
            for button in b.values():
                button.layout.display = "none"
            self._render_clock()
            self.stop()
            return
        for key, button in b.items():
            button.layout.display = "none" if key == "start" else None
        q = s.current
        assert q is not None  # started and not done
        self.header.value = (f"<b>Question {s.index + 1} of {len(s.cards)}</b> · "
                             f"{html.escape(_tag(q))}")
        self.question.value = f"<p style='font-size:1.1em'>{html.escape(q.question)}</p>"
        self.answer.value = _answer_html(q) if s.revealed else ""
        b["reveal"].disabled = s.revealed
        for key in MARKS:
            b[key].disabled = not s.revealed or s.marks[s.index] is not None
        b["next"].description = "Finish" if s.index == len(s.cards) - 1 else "Next question"
        self._render_clock()


def report_html(s: MockInterview) -> str:
    """The final report: time per question against its budget, self-scores, per topic."""
    head = "".join(f"<th>{h}</th>" for h in ("#", "topic", "level", "question", "time", "budget", "score"))
    rows = []
    for r in s.report():
        t = "-" if r.seconds is None else clock_text(r.seconds)
        if r.over:
            t = f"<span style='color:#b00020'>{t} (over)</span>"
        rows.append(f"<tr><td>{r.number}</td><td>{html.escape(TOPICS.get(r.question.topic, r.question.topic))}</td>"
                    f"<td>{r.question.level}</td><td>{html.escape(r.question.question[:90])}"
                    f"{'…' if len(r.question.question) > 90 else ''}</td><td>{t}</td>"
                    f"<td>{clock_text(r.budget)}</td><td>{MARK_LABELS.get(r.mark or 'skipped')}</td></tr>")
    over = sum(r.over for r in s.report())
    return (f"<table><tr>{head}</tr>{''.join(rows)}</table>"
            f"<p>{over} of {len(s.cards)} answers over their time budget.</p>"
            f"<p><b>Per topic</b></p>{summary_html(s.summary())}")


# ---------------------------------------------------------------- entry points

def quiz(topic: str | Sequence[str] | None = None, level: str | Sequence[str] | None = None,
         n: int = 10, seed: int | None = None) -> Quiz:
    """Flashcards: ``n`` questions (of a topic and/or level, or all), drawn in an order fixed
    by ``seed``. Show the answer, score yourself, move on; a per-topic summary ends it.

    >>> gpu_lab.drill.quiz(topic="mig", n=5, seed=1)   # doctest: +SKIP
    """
    return Quiz(QuizState(questions(topic, level), n=n, seed=seed))


def mock_interview(minutes: float = 20, n: int = 6, seed: int | None = None,
                   topic: str | Sequence[str] | None = None) -> MockInterviewView:
    """A timed mock interview: ``n`` questions across topics, difficulty rising, each with
    ``minutes / n`` to answer out loud; a report with the time per question at the end."""
    return MockInterviewView(MockInterview(questions(topic), minutes=minutes, n=n, seed=seed))
