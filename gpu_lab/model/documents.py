"""The documents of a manifest, read as kubectl reads them: YAML text, a file, or objects already loaded.

Every scenario is read here, by every backend, before anything is admitted (``scenario``
parses what this returns).
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

from ..errors import GpuLabError
from ..names import MAX_REQUEST_BYTES
from .yamlread import decode, parse_documents, read_file

Source = str | Path | dict | list


def load_documents(src: Source) -> list[dict]:
    """The documents of a YAML string, a file (``Path`` or path string), a dict or a list of dicts.

    Every scenario is read here (see ``yamlread``): files as kubectl reads them, YAML
    with libyaml and go-yaml's limits. Nothing to apply is an error, as for kubectl.
    """
    if isinstance(src, dict):
        docs = flatten([src], "<dict>")
    elif isinstance(src, (list, tuple)):
        docs = flatten(list(src), "<list>")
    elif isinstance(src, Path) or (isinstance(src, str) and _looks_like_path(src)):
        docs = _parse_yaml(read_file(src, str(src)), str(src))
    elif isinstance(src, str):
        docs = _parse_yaml(src, "<string>")
    elif isinstance(src, (bytes, bytearray)):
        docs = _parse_yaml(decode(bytes(src), "<bytes>"), "<bytes>")
    else:
        raise GpuLabError(f"cannot read a scenario from {type(src).__name__} "
                          "(give YAML text, a path, a dict or a list)")
    if not docs:
        raise GpuLabError("no objects passed to apply")
    return docs


def _looks_like_path(text: str) -> bool:
    """One line that is not YAML text: a file name (which then must exist)."""
    if "\n" in text or not text.strip():
        return False
    if text.endswith((".yaml", ".yml", ".json")):
        return True
    try:
        if Path(text).exists():
            return True
    except (OSError, ValueError):  # e.g. a one-line manifest longer than a file name may be
        return False
    # A mapping or a list on one line has one of these; a bare word is a file name.
    return not any(c in text for c in ":{}[]\"'#&*|>")


def _parse_yaml(text: str, name: str) -> list[dict]:
    """Every document, each checked against the API server's request limit (as each is sent
    on its own, whatever the file's size, so a step of the read costs the same per document at
    every scale). The cyclic garbage collector waits: parsing makes only acyclic dicts and
    lists, and its passes over a growing heap made a large file's read grow faster than it."""
    out = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for doc, line, span in parse_documents(text, name):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise GpuLabError(f"error parsing {name}: a document must be a mapping, got "
                                  f"{type(doc).__name__} (line {line})")
            small = span is not None and span * JSON_BYTES_PER_CHAR <= MAX_REQUEST_BYTES
            for d in flatten([doc], name):
                if not small:
                    _check_request_size(d, name)
                out.append(d)
    finally:
        if enabled:
            gc.enable()
    return out


#: the most JSON bytes one character of YAML text can become (an astral character escaped as
#: two \uXXXX is 12; a one-letter boolean, a key and its colon stay under it): a document
#: whose text is under the limit divided by this cannot be over it, and is not measured
JSON_BYTES_PER_CHAR = 16


def _check_request_size(doc: dict, name: str) -> None:
    """The API server takes at most 3 MiB per request: one object."""
    size = len(json.dumps(doc, separators=(",", ":"), default=str).encode())
    if size > MAX_REQUEST_BYTES:
        meta = _meta(doc)
        raise GpuLabError(f'error when creating "{name}": Request entity too large: limit is '
                          f'{MAX_REQUEST_BYTES} ({doc.get("kind")} "{meta.get("name", "")}" is '
                          f"{size} bytes)")


def flatten(docs: list, name: str) -> list[dict]:
    """Skip empty documents and unpack ``v1 List`` (what ``kubectl get -o yaml`` prints)."""
    out = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise GpuLabError(f"error parsing {name}: a document must be a mapping, got {type(doc).__name__}")
        if doc.get("apiVersion") == "v1" and doc.get("kind") == "List":
            out += flatten(list(doc.get("items") or []), name)
        else:
            out.append(doc)
    return out


def _meta(doc: dict) -> dict:
    return metadata_raw if isinstance(metadata_raw := doc.get("metadata"), dict) else {}
