"""The subset of CEL that DRA device selectors use: compiled and evaluated as the API server
and kube-scheduler do (k8s.io/dynamic-resource-allocation/cel over cel-go v0.29).

``compile_selector(text)`` returns a ``Selector`` or raises ``CelCompileError`` whose
``detail`` is what the API server puts after the expression in its Invalid value error:
``compilation failed: ERROR: <input>:1:15: found no matching overload for '_==_' applied to
'(string, int)'`` followed by cel-go's source line and caret, or ``must evaluate to bool or
the unknown type, not string``. ``Selector.matches(device)`` evaluates it against one
device as the allocator does; a missing attribute is cel-go's runtime error ``no such key:
<name>`` with the hint DRA adds.

The environment is DRA's (``kubernetes.DRADevice``): ``device.driver`` (string),
``device.allowMultipleAllocations`` (bool), ``device.attributes`` (map(string, map(string,
any)), one inner map per domain; a domain the device lacks is an empty map) and
``device.capacity`` (map(string, map(string, kubernetes.Quantity))). Modelled functions:
the operators (``== != < <= > >= && || ! - + * / % in ?:``, indexing), ``has()``,
``size``, the string methods ``startsWith endsWith contains matches lowerAscii upperAscii``,
``quantity()``/``isQuantity()`` with ``compareTo isGreaterThan isLessThan add sub sign
asInteger asApproximateFloat isInteger``, and ``semver()``/``isSemver()`` with ``compareTo
isGreaterThan isLessThan major minor patch``. Anything else that real CEL accepts (macros
such as ``exists``, timestamps, ``.?`` optionals) is refused with a line that says the
simulator does not model it, never silently.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ...errors import CelCompileError, QuantityError
from ...model.quantity import parse_quantity
from .celparse import CelSyntaxError, Node, SyntaxIssue, parse

# --------------------------------------------------------------------------- types
DYN, ANY, ERROR = "dyn", "any", "*error*"
QUANTITY, SEMVER, DEVICE = "kubernetes.Quantity", "kubernetes.Semver", "kubernetes.DRADevice"
ATTRIBUTES = ("map", "string", ("map", "string", ANY))
CAPACITY = ("map", "string", ("map", "string", QUANTITY))
DEVICE_FIELDS = {"driver": "string", "allowMultipleAllocations": "bool", "attributes": ATTRIBUTES,
                 "capacity": CAPACITY}
NOT_MODELLED = ("all", "exists", "exists_one", "map", "filter", "optMap", "optFlatMap", "orValue",
                "timestamp", "duration", "getField", "ip", "cidr", "url", "format", "split", "join",
                "replace", "trim", "indexOf", "lastIndexOf", "substring", "charAt", "reverse")


def fmt(t: Any) -> str:
    """cel-go's ``FormatCELType``."""
    if isinstance(t, tuple):
        return f"{t[0]}({', '.join(fmt(p) for p in t[1:])})"
    return t


def _loose(t: Any) -> bool:
    return t in (DYN, ANY, ERROR)


# Overloads: name -> list of (member?, params, result); "A"/"B" are type parameters.
_NUMS = ("int", "uint", "double")
_ORDERED = [(a, b) for a in _NUMS for b in _NUMS] + [(t, t) for t in ("string", "bytes", "bool")]
_DECLS: dict[str, list[tuple[bool, tuple, Any]]] = {
    "_==_": [(False, ("A", "A"), "bool")],
    "_!=_": [(False, ("A", "A"), "bool")],
    **{op: [(False, p, "bool") for p in _ORDERED] for op in ("_<_", "_<=_", "_>_", "_>=_")},
    "_+_": [(False, (t, t), t) for t in ("int", "uint", "double", "string", "bytes")]
    + [(False, (("list", "A"), ("list", "A")), ("list", "A"))],
    **{op: [(False, (t, t), t) for t in _NUMS] for op in ("_-_", "_*_", "_/_")},
    "_%_": [(False, (t, t), t) for t in ("int", "uint")],
    "-_": [(False, ("int",), "int"), (False, ("double",), "double")],
    "!_": [(False, ("bool",), "bool")],
    "@in": [(False, ("A", ("list", "A")), "bool"), (False, ("A", ("map", "A", "B")), "bool")],
    "_?_:_": [(False, ("bool", "A", "A"), "A")],
    "_[_]": [(False, (("list", "A"), "int"), "A"), (False, (("map", "A", "B"), "A"), "B")],
    "size": [(False, (t,), "int") for t in ("string", "bytes", ("list", "A"), ("map", "A", "B"))]
    + [(True, (t,), "int") for t in ("string", "bytes", ("list", "A"), ("map", "A", "B"))],
    **{m: [(True, ("string", "string"), "bool")] for m in ("startsWith", "endsWith", "contains", "matches")},
    "lowerAscii": [(True, ("string",), "string")],
    "upperAscii": [(True, ("string",), "string")],
    "quantity": [(False, ("string",), QUANTITY)],
    "isQuantity": [(False, ("string",), "bool")],
    "semver": [(False, ("string",), SEMVER), (False, ("string", "bool"), SEMVER)],
    "isSemver": [(False, ("string",), "bool"), (False, ("string", "bool"), "bool")],
    "compareTo": [(True, (QUANTITY, QUANTITY), "int"), (True, (SEMVER, SEMVER), "int")],
    "isGreaterThan": [(True, (QUANTITY, QUANTITY), "bool"), (True, (SEMVER, SEMVER), "bool")],
    "isLessThan": [(True, (QUANTITY, QUANTITY), "bool"), (True, (SEMVER, SEMVER), "bool")],
    "add": [(True, (QUANTITY, QUANTITY), QUANTITY), (True, (QUANTITY, "int"), QUANTITY)],
    "sub": [(True, (QUANTITY, QUANTITY), QUANTITY), (True, (QUANTITY, "int"), QUANTITY)],
    "sign": [(True, (QUANTITY,), "int")],
    "asInteger": [(True, (QUANTITY,), "int")],
    "asApproximateFloat": [(True, (QUANTITY,), "double")],
    "isInteger": [(True, (QUANTITY,), "bool")],
    **{m: [(True, (SEMVER,), "int")] for m in ("major", "minor", "patch")},
    "string": [(False, (t,), "string") for t in ("string", "int", "uint", "double", "bool", "bytes")],
    "int": [(False, (t,), "int") for t in ("int", "uint", "double", "string")],
    "double": [(False, (t,), "double") for t in ("int", "uint", "double", "string")],
}


class CelRuntimeError(Exception):
    """cel-go's runtime error text (the allocator wraps it)."""


def _display(text: str, issues: list[SyntaxIssue]) -> str:
    """cel-go's ``Errors.ToDisplayString``: each error with its source line and a caret."""
    out = []
    lines = text.split("\n")
    for issue in sorted(issues, key=lambda s: s.pos):
        line_no = text.count("\n", 0, issue.pos) + 1
        col = issue.pos - (text.rfind("\n", 0, issue.pos) + 1)
        msg = f"ERROR: <input>:{line_no}:{col + 1}: {issue.message}"
        snippet = lines[line_no - 1].replace("\t", " ")
        if len(snippet) <= 16384:
            msg += "\n | " + snippet + "\n | " + "".join(
                "\uff0e" if len(ch.encode()) > 1 else "." for ch in snippet[:col]) + (
                "\uff3e" if col < len(snippet) and len(snippet[col].encode()) > 1 else "^")
        out.append(msg)
    return "\n".join(out)


# ------------------------------------------------------------------------- checker

class _Checker:
    def __init__(self) -> None:
        self.issues: list[SyntaxIssue] = []
        self.types: dict[int, Any] = {}

    def error(self, node: Node, message: str) -> Any:
        self.issues.append(SyntaxIssue(node.pos, message))
        return ERROR

    def check(self, node: Node) -> Any:
        t = self._check(node)
        self.types[id(node)] = t
        return t

    def _check(self, node: Node) -> Any:
        if node.op == "lit":
            return node.kind
        if node.op == "ident":
            if node.value == "device":
                return DEVICE
            return self.error(node, f"undeclared reference to '{node.value}' (in container '')")
        if node.op == "select":
            assert node.target is not None  # the parser gives every select node its operand
            return self.select(node, self.check(node.target))
        if node.op == "list":
            elems = [self.check(a) for a in node.args]
            return ("list", _join(elems))
        if node.op == "map":
            keys = [self.check(a) for a in node.args[0::2]]
            vals = [self.check(a) for a in node.args[1::2]]
            return ("map", _join(keys), _join(vals))
        return self.call(node)

    def select(self, node: Node, operand: Any) -> Any:
        if operand == ERROR:
            return ERROR
        if operand == DEVICE:
            if node.value not in DEVICE_FIELDS:
                return self.error(node, f"undefined field '{node.value}'")
            return DEVICE_FIELDS[node.value]
        if isinstance(operand, tuple) and operand[0] == "map":
            if not _assignable(operand[1], "string", {}):
                return self.error(node, f"type '{fmt(operand)}' does not support field selection")
            return operand[2]
        if _loose(operand):
            return DYN
        return self.error(node, f"type '{fmt(operand)}' does not support field selection")

    def call(self, node: Node) -> Any:
        name = node.value
        if name == "has" and node.target is None:
            return self.has(node)
        args = [self.check(a) for a in node.args]
        target = self.check(node.target) if node.target is not None else None
        if name in NOT_MODELLED:
            raise CelCompileError(f"{name}() is valid CEL but outside the CEL subset gpu-lab's simulator "
                                  "models for DRA selectors")
        if name in ("_&&_", "_||_"):
            bad = False
            for a, t in zip(node.args, args):
                if not _assignable("bool", t, {}):
                    self.error(a, f"expected type 'bool' but found '{fmt(t)}'")
                    bad = True
            return ERROR if bad else "bool"
        decls = _DECLS.get(name)
        if decls is None:
            return self.error(node, f"undeclared reference to '{name}' (in container '')")
        types_ = ([target] if target is not None else []) + args
        result = None
        for member, params, res in decls:
            if member != (target is not None) or len(params) != len(types_):
                continue
            binding: dict[str, Any] = {}
            if all(_assignable(p, t, binding) for p, t in zip(params, types_)):
                got = _substitute(res, binding)
                result = got if result is None else (result if result == got else DYN)
        if result is None:
            if any(t == ERROR for t in types_):
                return ERROR
            shown = ", ".join(fmt(t) for t in args)
            sig = f"{fmt(target)}.({shown})" if target is not None else f"({shown})"
            return self.error(node, f"found no matching overload for '{name}' applied to '{sig}'")
        return result

    def has(self, node: Node) -> Any:
        if len(node.args) != 1 or node.args[0].op != "select":
            pos = node.args[0] if node.args else node
            raise _MacroError(SyntaxIssue(pos.pos, "invalid argument to has() macro"))
        target = node.args[0].target
        assert target is not None  # the parser gives every select node its operand
        self.check(target)
        return "bool"


class _MacroError(Exception):
    def __init__(self, issue: SyntaxIssue):
        self.issue = issue


def _assignable(param: Any, arg: Any, binding: dict[str, Any]) -> bool:
    """Can a value of type ``arg`` be passed where ``param`` is declared (binding type params)?"""
    if param in ("A", "B"):
        bound = binding.get(param)
        if bound is None or _loose(bound):
            binding[param] = arg
            return True
        return _assignable(bound, arg, binding) or _loose(arg)
    if _loose(param) or _loose(arg):
        return True
    if isinstance(param, tuple) or isinstance(arg, tuple):
        return (isinstance(param, tuple) and isinstance(arg, tuple) and param[0] == arg[0]
                and len(param) == len(arg) and all(_assignable(p, a, binding) for p, a in zip(param[1:], arg[1:])))
    return param == arg


def _substitute(t: Any, binding: dict[str, Any]) -> Any:
    if isinstance(t, tuple):
        return (t[0], *(_substitute(p, binding) for p in t[1:]))
    if t in ("A", "B"):
        return binding.get(t, DYN)
    return t


def _join(types_: list[Any]) -> Any:
    distinct = set(map(repr, types_))
    return types_[0] if len(distinct) == 1 else DYN


# ------------------------------------------------------------------------ values

@dataclass(frozen=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: str = ""

    @classmethod
    def parse(cls, text: str) -> Semver:
        m = re.fullmatch(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?", text)
        if not m:
            raise CelRuntimeError(f"could not parse semver: {text!r}")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or "")

    def key(self) -> tuple:
        # A pre-release sorts before its release (semver 2.0.0 precedence, simplified).
        return (self.major, self.minor, self.patch, self.pre == "", self.pre)


@dataclass(frozen=True)
class Quantity:
    value: Fraction


def _cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


class _NoSuchKey(CelRuntimeError):
    pass


class _DefaultMap(dict):
    """DRA's attribute and capacity maps: a domain the device lacks reads as an empty map."""

    def __missing__(self, key: Any) -> dict:
        return {}


def _call(name: str, args: list[Any], target: Any) -> Any:
    if target is not None:
        args = [target, *args]
    if name in ("_==_", "_!=_"):
        same = _equal(args[0], args[1])
        return same if name == "_==_" else not same
    if name in ("_<_", "_<=_", "_>_", "_>=_"):
        c = _cmp(args[0], args[1])
        return {"_<_": c < 0, "_<=_": c <= 0, "_>_": c > 0, "_>=_": c >= 0}[name]
    if name == "@in":
        return any(_equal(args[0], x) for x in args[1]) if isinstance(args[1], list) else args[0] in args[1]
    if name == "_[_]":
        container, key = args
        if isinstance(container, list):
            if not isinstance(key, int) or not -len(container) <= key < len(container) or key < 0:
                raise CelRuntimeError(f"index out of range: {key}")
            return container[key]
        if isinstance(container, _DefaultMap) or key in container:
            return container[key]
        raise _NoSuchKey(f"no such key: {key}")
    if name == "_+_":
        return args[0] + args[1]
    if name in ("_-_", "_*_", "_/_", "_%_"):
        a, b = args
        if name in ("_/_", "_%_") and b == 0:
            raise CelRuntimeError("division by zero" if name == "_/_" else "modulus by zero")
        if name == "_/_":
            return int(a / b) if isinstance(a, int) else a / b
        if name == "_%_":
            return int(a - b * int(a / b))
        return a - b if name == "_-_" else a * b
    if name == "-_":
        return -args[0]
    if name == "!_":
        return not args[0]
    if name == "size":
        return len(args[0])
    if name in ("startsWith", "endsWith", "contains"):
        s, x = args
        return {"startsWith": s.startswith, "endsWith": s.endswith, "contains": s.__contains__}[name](x)
    if name == "matches":
        try:
            return re.search(args[1], args[0]) is not None
        except re.error as err:
            raise CelRuntimeError(f"error parsing regexp: {err}") from None
    if name in ("lowerAscii", "upperAscii"):
        s = args[0]
        return "".join(c.lower() if name == "lowerAscii" and c.isascii() else c.upper() if c.isascii() else c
                       for c in s)
    if name in ("quantity", "isQuantity"):
        try:
            q = Quantity(parse_quantity(args[0]))
        except QuantityError:
            if name == "isQuantity":
                return False
            raise CelRuntimeError("quantities must match the regular expression "
                                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'") from None
        return True if name == "isQuantity" else q
    if name in ("semver", "isSemver"):
        try:
            v = Semver.parse(args[0])
        except CelRuntimeError:
            if name == "isSemver":
                return False
            raise
        return True if name == "isSemver" else v
    a = args[0]
    if name in ("compareTo", "isGreaterThan", "isLessThan"):
        c = _cmp(a.value, args[1].value) if isinstance(a, Quantity) else _cmp(a.key(), args[1].key())
        return {"compareTo": c, "isGreaterThan": c > 0, "isLessThan": c < 0}[name]
    if name in ("add", "sub"):
        other = args[1].value if isinstance(args[1], Quantity) else Fraction(args[1])
        return Quantity(a.value + other if name == "add" else a.value - other)
    if name == "sign":
        return _cmp(a.value, 0)
    if name == "asInteger":
        if a.value.denominator != 1:
            raise CelRuntimeError("cannot convert value to integer")
        return int(a.value)
    if name == "asApproximateFloat":
        return float(a.value)
    if name == "isInteger":
        return a.value.denominator == 1
    if name in ("major", "minor", "patch"):
        return getattr(a, name)
    if name == "string":
        return a if isinstance(a, str) else str(a).lower() if isinstance(a, bool) else str(a)
    if name == "int":
        return int(a)
    if name == "double":
        return float(a)
    raise CelRuntimeError(f"no such overload: {name}")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return False
    return a == b


class _Evaluator:
    def __init__(self, device: dict[str, Any]):
        self.device = device

    def eval(self, node: Node) -> Any:
        op = node.op
        if op == "lit":
            return node.value
        if op == "ident":
            return self.device
        if op == "select":
            assert node.target is not None  # the parser gives every select node its operand
            operand = self.eval(node.target)
            if isinstance(operand, _DefaultMap) or node.value in operand:
                return operand[node.value]
            raise _NoSuchKey(f"no such key: {node.value}")
        if op == "list":
            return [self.eval(a) for a in node.args]
        if op == "map":
            return {self.eval(k): self.eval(v) for k, v in zip(node.args[0::2], node.args[1::2])}
        name = node.value
        if name == "has":
            sel = node.args[0]
            assert sel.target is not None  # the checker let has() through only on a select node
            return sel.value in self.eval(sel.target)
        if name in ("_&&_", "_||_"):
            return self.logical(name == "_&&_", node.args)
        if name == "_?_:_":
            return self.eval(node.args[1] if self.eval(node.args[0]) else node.args[2])
        target = self.eval(node.target) if node.target is not None else None
        return _call(name, [self.eval(a) for a in node.args], target)

    def logical(self, is_and: bool, args: list[Node]) -> bool:
        """CEL's commutative && and ||: a deciding operand wins over an error in the other."""
        error = None
        for a in args:
            try:
                v = self.eval(a)
            except CelRuntimeError as err:
                error = error or err
                continue
            if v is (not is_and):
                return v
        if error is not None:
            raise error
        return is_and


# ------------------------------------------------------------------------ compile

@dataclass(frozen=True)
class Selector:
    """A compiled device selector."""

    expression: str
    ast: Node

    def matches(self, driver: str, attributes: dict[str, dict[str, Any]],
                capacity: dict[str, dict[str, Fraction]], allow_multiple: bool = False) -> bool:
        """Evaluate against one device; ``CelRuntimeError`` carries cel-go's message (with
        DRA's hint for a missing key)."""
        device = {"driver": driver, "allowMultipleAllocations": allow_multiple,
                  "attributes": _DefaultMap(attributes),
                  "capacity": _DefaultMap({d: {k: Quantity(v) for k, v in m.items()} for d, m in capacity.items()})}
        try:
            result = _Evaluator(device).eval(self.ast)
        except _NoSuchKey as err:
            raise CelRuntimeError(f"{err}. consider using CEL optional chaining (.? followed by orValue()) "
                                  "or guarding the check with has() for optional fields") from None
        except (TypeError, AttributeError, ValueError) as err:  # a dyn value of the wrong type
            raise CelRuntimeError(f"no such overload: {err}") from None
        if not isinstance(result, bool):
            raise CelRuntimeError(f"CEL result of type {type(result).__name__} could not be converted to bool")
        return result


@functools.lru_cache(maxsize=512)
def compile_selector(text: str) -> Selector:
    """Compile as the API server does on create (``CompileCELExpression``, NewExpressions)."""
    try:
        ast = parse(text)
    except CelSyntaxError as err:
        raise CelCompileError("compilation failed: " + _display(text, err.issues)) from None
    checker = _Checker()
    try:
        result = checker.check(ast)
    except _MacroError as err:
        raise CelCompileError("compilation failed: " + _display(text, [err.issue])) from None
    if checker.issues:
        raise CelCompileError("compilation failed: " + _display(text, checker.issues))
    if result not in ("bool", ANY):
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {fmt(result)}")
    return Selector(text, ast)
