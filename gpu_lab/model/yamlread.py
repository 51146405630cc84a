"""Reading scenario text the way kubectl does, with the limits that keep a typo harmless.

One reading path for every scenario (``scenario.load_documents``):

* bytes are decoded as kubectl's file reader does (``unicode.BOMOverride``): a UTF-8
  or UTF-16 byte-order mark picks the encoding, everything else must be UTF-8;
  text that is not (Latin-1, binary) is refused in one line, naming the byte;
* YAML is parsed with libyaml (``yaml.CSafeLoader``) where it is installed, ten
  times faster than the pure-Python parser, with the safe constructors;
* scalars read as sigs.k8s.io/yaml (go-yaml v2) reads them on the way to JSON:
  timestamps stay strings, and integer, float and boolean map keys become strings;
* aliases are checked before anything is built from them: a document that expands
  to far more nodes than it holds is refused with go-yaml's "excessive aliasing"
  (the rule kubectl applies), an anchor that contains itself with go-yaml's
  words, and nesting deeper than ``MAX_DEPTH`` levels is refused too.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import yaml

from ..errors import GpuLabError

MAX_SCENARIO_BYTES = 64 * 2**20  # far above any real scenario; a runaway file stops here
MAX_DEPTH = 200  # Kubernetes objects nest a few dozen levels at most
if TYPE_CHECKING:
    _BASE = yaml.SafeLoader  # the C loader serves the same API; the checker needs one class
else:
    _BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
C_LOADER = _BASE is not yaml.SafeLoader


class _Resolver(yaml.resolver.Resolver):
    """YAML 1.1 implicit types, less timestamps (go-yaml v2 keeps them as strings)."""


_Resolver.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
}


class Loader(_BASE):
    """``CSafeLoader`` (or ``SafeLoader``) with go-yaml's scalars and JSON's map keys."""

    yaml_implicit_resolvers = _Resolver.yaml_implicit_resolvers

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._plain: dict[str, str] = {}

    def resolve(self, kind, value, implicit):
        """A plain scalar's tag depends on its text alone (no path resolvers here): each
        distinct text is matched against the implicit resolvers once per read."""
        if kind is yaml.ScalarNode and implicit[0]:
            tag = self._plain.get(value)
            if tag is None:
                tag = self._plain[value] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)

    def construct_mapping(self, node, deep=False):
        """SafeConstructor's, each key made a JSON string as it is read: 1 and true stay two
        keys ("1", "true"), as go-yaml keeps them, instead of one Python key."""
        self.flatten_mapping(node)  # merge keys
        mapping = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                        "found unhashable key", key_node.start_mark)
            mapping[key if type(key) is str else _json_key(key, node)] = self.construct_object(value_node, deep=deep)
        return mapping


def _json_key(key: Any, node) -> str:
    """``convertToJSONableObject``: map keys must become JSON strings."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return repr(key) if key != int(key) or abs(key) >= 1e21 else str(int(key))
    raise yaml.constructor.ConstructorError(
        None, None, f"Unsupported map key of type: {type(key).__name__}, key: {key!r}", node.start_mark)


def read_file(path, shown: str) -> str:
    """The text of a scenario file, or one line saying why it cannot be read."""
    from pathlib import Path

    p = Path(path)
    try:
        if p.is_dir():
            raise GpuLabError(f'the path "{shown}" is a directory: give one scenario file')
        with open(p, "rb") as f:
            data = f.read(MAX_SCENARIO_BYTES + 1)
    except FileNotFoundError:
        raise GpuLabError(f'the path "{shown}" does not exist') from None
    except GpuLabError:
        raise
    except OSError as err:
        raise GpuLabError(f"open {shown}: {(err.strerror or str(err)).lower()}") from None
    return decode(data, shown)


def decode(data: bytes, name: str) -> str:
    """Bytes to text as kubectl reads a file: BOM-selected UTF-8 or UTF-16, else UTF-8."""
    if len(data) > MAX_SCENARIO_BYTES:
        raise GpuLabError(f"{name}: larger than {MAX_SCENARIO_BYTES // 2**20} MiB; "
                          "that is not a scenario")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as err:
            raise GpuLabError(f"error parsing {name}: invalid UTF-16 after its byte-order mark "
                              f"(offset {err.start})") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise GpuLabError(f"error parsing {name}: binary data, not YAML text (a NUL byte at offset {nul}; "
                          "UTF-16 text needs a byte-order mark)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise GpuLabError(f"error parsing {name}: yaml: invalid UTF-8: byte 0x{data[err.start]:02x} "
                          f"at line {line} (offset {err.start}); save the file as UTF-8") from None


_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_SLOW = object()  # the document needs the full constructor


class _Slow(Exception):
    """Raised inside ``_built`` where a node needs the full constructor."""


def _built(root, loader) -> Any:
    """A document without aliases built straight from its nodes, as ``construct_document``
    builds it (the same values, go-yaml's map keys): three times faster on a large file,
    where the generic constructor's bookkeeping per node is most of the read. Anything
    beyond plain maps, sequences and core scalars (merge keys, explicit tags such as
    ``!!binary`` or ``!!set``, a non-scalar key) returns ``_SLOW``: that document goes the
    full way, errors and all."""
    scalars = {"tag:yaml.org,2002:int": loader.construct_yaml_int,
               "tag:yaml.org,2002:float": loader.construct_yaml_float,
               "tag:yaml.org,2002:bool": loader.construct_yaml_bool,
               "tag:yaml.org,2002:null": loader.construct_yaml_null}
    scalar_type, mapping_type = yaml.ScalarNode, yaml.MappingNode
    Slow = _Slow

    def scalar(node):
        if node.tag == _STR:
            return node.value
        make = scalars.get(node.tag)
        if make is None:
            raise Slow
        return make(node)

    def build(node):
        t = type(node)
        if t is scalar_type:
            return scalar(node)
        if t is mapping_type:
            if node.tag != _MAP:
                raise Slow
            out = {}
            for k, v in node.value:
                if type(k) is not scalar_type:
                    raise Slow
                key = k.value if k.tag == _STR else scalar(k)
                if type(key) is not str:
                    key = _json_key(key, node)
                out[key] = build(v)
            return out
        if node.tag != _SEQ:
            raise Slow
        return [build(v) for v in node.value]

    try:
        return build(root)
    except Slow:
        return _SLOW


def _needs_graph_check(text: str) -> bool:
    """Cheap test: could this text hold aliases or nest deeper than ``MAX_DEPTH``?"""
    if "*" in text:
        return True
    flow = text.count("[") + text.count("{")
    room = (MAX_DEPTH - flow) // 2 - 1  # block nesting takes at least one column per two levels
    return room <= 0 or re.search(rf"^[ \-?:]{{{room},}}", text, re.M) is not None


def _check_graph(root, name: str) -> None:
    """go-yaml v2's alias rules on a composed document, without expanding it.

    Each node's expanded size (``decodeCount``) and alias count are worked out once
    and reused wherever an alias points at it, so a billion laughs costs what it holds.
    """
    # id -> (nodes decoded, of those decoded through an alias, height)
    done: dict[int, tuple[int, int, int]] = {}
    active: set[int] = set()

    def children(node) -> list:
        if isinstance(node, yaml.MappingNode):
            return [x for pair in node.value for x in pair]
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        return []

    # frame: [node, children, next index, count, aliases, height]
    stack = [[root, children(root), 0, 1, 0, 0]]
    active.add(id(root))
    while stack:
        frame = stack[-1]
        node, kids, i = frame[0], frame[1], frame[2]
        if i < len(kids):
            frame[2] += 1
            child = kids[i]
            cid = id(child)
            if cid in active:
                raise GpuLabError(f"error parsing {name}: yaml: anchor value contains itself "
                                  f"(line {child.start_mark.line + 1})")
            got = done.get(cid)
            if got is not None:  # a second reference: an alias; go-yaml counts all it decodes
                frame[3] += 1 + got[0]
                frame[4] += got[0]
                frame[5] = max(frame[5], got[2] + 1)
                if len(stack) + got[2] > MAX_DEPTH:
                    _too_deep(name, child)
                continue
            if len(stack) >= MAX_DEPTH:
                _too_deep(name, child)
            active.add(cid)
            stack.append([child, children(child), 0, 1, 0, 0])
            continue
        stack.pop()
        active.discard(id(node))
        done[id(node)] = (frame[3], frame[4], frame[5])
        if stack:
            parent = stack[-1]
            parent[3] += frame[3]
            parent[4] += frame[4]
            parent[5] = max(parent[5], frame[5] + 1)
    count, aliases, _ = done[id(root)]
    if aliases > 100 and count > 1000 and aliases / count > _allowed_alias_ratio(count):
        raise GpuLabError(f"error parsing {name}: yaml: document contains excessive aliasing "
                          f"(line {root.start_mark.line + 1})")


def _allowed_alias_ratio(decoded: int) -> float:
    """go-yaml v2's ``allowedAliasRatio``."""
    if decoded <= 400_000:
        return 0.99
    if decoded >= 4_000_000:
        return 0.10
    return 0.99 - 0.89 * ((decoded - 400_000) / 3.6e6)


def _too_deep(name: str, node) -> None:
    raise GpuLabError(f"error parsing {name}: exceeded max depth of {MAX_DEPTH} "
                      f"(line {node.start_mark.line + 1})")


def parse_documents(text: str, name: str) -> list[tuple[Any, int, int | None]]:
    """(document, first line, characters of its text, None where aliases may expand it) for
    every document of a YAML stream; errors are one line."""
    if len(text) > MAX_SCENARIO_BYTES:
        raise GpuLabError(f"{name}: larger than {MAX_SCENARIO_BYTES // 2**20} MiB; that is not a scenario")
    check = _needs_graph_check(text)
    docs: list[tuple[Any, int, int | None]] = []
    loader = None
    try:
        loader = Loader(text)
        while loader.check_node():
            node = loader.get_node()
            assert node is not None  # check_node() said one follows
            if check:
                _check_graph(node, name)
            value = _built(node, loader) if not check else _SLOW
            if value is _SLOW:
                value = loader.construct_document(node)
            # the document's own text, where nothing (an alias) can make it larger than that
            span = None if check else node.end_mark.index - node.start_mark.index
            docs.append((value, node.start_mark.line + 1, span))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" (line {mark.line + 1})" if mark else ""
        problem = " ".join(str(err.problem or err.context).split())
        raise GpuLabError(f"error parsing {name}: {problem}{where}") from None
    except yaml.YAMLError as err:
        raise GpuLabError(f"error parsing {name}: {' '.join(str(err).split())}") from None
    except RecursionError:  # the pure-Python parser recurses per level
        raise GpuLabError(f"error parsing {name}: exceeded max depth of {MAX_DEPTH}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return docs
