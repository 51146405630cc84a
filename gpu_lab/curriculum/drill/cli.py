"""``gpu-lab drill ...``: the interview question bank from a shell.

    gpu-lab drill export [--json] [--topic TOPIC ...] [--level LEVEL ...]
    gpu-lab drill topics            # topic keys with question counts per level
    gpu-lab drill validate [FILE]   # check a bank file (the shipped one by default)

``export --json`` prints a JSON list of objects with exactly the keys id, topic, level,
question, answer, follow_ups, lesson. Exit codes: 0 done, 1 ``validate`` found problems
(one per line), 2 bad arguments (one ``error: ...`` line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from ...errors import BankError
from .bank import LEVELS, TOPICS, parse_bank, questions, validate_bank


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise _UsageError(message)


def cmd_export(args) -> int:
    picked = questions(args.topic, args.level)
    if args.json:
        print(json.dumps([q.to_dict() for q in picked], indent=2, ensure_ascii=False))
        return 0
    wrap = textwrap.TextWrapper(width=92, initial_indent="    ", subsequent_indent="    ")
    for i, q in enumerate(picked, 1):
        print(f"[{i}] {q.id}  ({q.topic}, {q.level})")
        print(textwrap.fill(q.question, width=92, initial_indent="Q:  ", subsequent_indent="    "))
        print(textwrap.fill(q.answer, width=92, initial_indent="A:  ", subsequent_indent="    "))
        for f in q.follow_ups:
            print(wrap.fill(f"- {f}"))
        print(f"    lesson: lessons/{q.lesson}")
        print()
    print(f"{len(picked)} question{'s' if len(picked) != 1 else ''}")
    return 0


def cmd_topics(args) -> int:
    every = questions()
    print(f"{'topic':<18} " + " ".join(f"{lv:>12}" for lv in LEVELS) + f" {'total':>6}")
    for topic in TOPICS:
        counts = [sum(q.topic == topic and q.level == lv for q in every) for lv in LEVELS]
        print(f"{topic:<18} " + " ".join(f"{c:>12}" for c in counts) + f" {sum(counts):>6}")
    print(f"{'all':<18} " + " ".join(f"{sum(q.level == lv for q in every):>12}" for lv in LEVELS)
          + f" {len(every):>6}")
    return 0


def cmd_validate(args) -> int:
    if args.file is None:
        from .bank import BANK_PATH as path
    else:
        path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise BankError(f"cannot read {path}: {e.strerror or e}") from None
    errors = validate_bank(parse_bank(text))
    for line in errors:
        print(line)
    if not errors:
        print(f"{path.name}: valid")
    return 1 if errors else 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gpu-lab drill", description="the interview question bank")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    ex = sub.add_parser("export", help="print the questions with model answers (--json for tools)")
    ex.add_argument("--json", action="store_true", help="a JSON list (keys: id, topic, level, "
                    "question, answer, follow_ups, lesson)")
    ex.add_argument("--topic", action="append", choices=list(TOPICS), help="only this topic (repeatable)")
    ex.add_argument("--level", action="append", choices=list(LEVELS), help="only this level (repeatable)")
    ex.set_defaults(func=cmd_export)
    t = sub.add_parser("topics", help="topics with question counts per level")
    t.set_defaults(func=cmd_topics)
    v = sub.add_parser("validate", help="check a question-bank YAML file (default: the shipped bank)")
    v.add_argument("file", nargs="?", help="bank YAML file")
    v.set_defaults(func=cmd_validate)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return int(e.code or 0)
    try:
        return args.func(args)
    except BankError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `gpu-lab drill export | head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
