"""The learner's manifests, however they are handed to a check: one reader for every lab."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

import yaml

from ...errors import GpuLabError


def read_manifests(submission: Any, title: str) -> list[dict]:
    """A list of manifest dicts from YAML text, a path to a YAML file (str or PathLike), a
    dict, or a list of any of these; None is no manifests. Dicts are copied, so a check
    never changes the learner's objects. Documents that are not mappings are left out."""
    if submission is None:
        return []
    if isinstance(submission, Mapping):
        return [copy.deepcopy(dict(submission))]
    if isinstance(submission, (list, tuple)):
        return [d for item in submission for d in read_manifests(item, title)]
    if isinstance(submission, (str, os.PathLike)):
        text = str(submission)
        if "\n" not in text and (text.endswith((".yaml", ".yml")) or os.path.exists(text)):
            with open(text, encoding="utf-8") as f:
                text = f.read()
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as err:
            raise GpuLabError(f"not YAML: {str(err).splitlines()[0]}") from None
        return [d for d in docs if isinstance(d, dict)]
    raise GpuLabError(f"{title}: give the manifests as a list of dicts, YAML text or a file path, "
                      f"not {type(submission).__name__}")


def hardware_problem(docs: list[dict], kinds: tuple[str, ...], fixed: str) -> str | None:
    """The one line for a submission that brings its own hardware (objects of ``kinds``) to
    a lab whose cluster is fixed (``fixed`` says how), or None."""
    hardware = [d for d in docs if d.get("kind") in kinds]
    if not hardware:
        return None
    names = ", ".join(f"{d['kind']} {(d.get('metadata') or {}).get('name', '?')}" for d in hardware)
    return f"the submission brings hardware ({names}): {fixed}"

