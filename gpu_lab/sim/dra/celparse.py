"""The CEL grammar DRA selectors use, parsed as cel-go v0.29 parses it, errors included.

``parse(text)`` returns an AST of ``Node`` records or raises ``CelSyntaxError`` holding
the errors cel-go's ANTLR lexer and parser would report, each at cel-go's position
(``<input>:line:column``, the column 1-based in characters). The messages follow
ANTLR's default error strategy as cel-go surfaces them:

* the lexer: ``token recognition error at: '<text>'`` where text runs from the first
  character no token starts with to the character that stopped it (``'= '`` for a lone
  ``=``); lexing resumes after it, so a parser error usually follows;
* the parser: ``extraneous input 'X' expecting E`` when dropping one token would do,
  ``missing ')' at 'X'`` when inserting the expected token would, otherwise
  ``mismatched input 'X' expecting E``; ``no viable alternative at input '.X'`` after a
  dangling ``.``. E is ``<EOF>``, one quoted token, or the set of tokens an expression
  may start with.

ANTLR's recovery after the first parser error is not reproduced: the first one is
reported (with the lexer errors before it), which is what the API server shows first.

Positions follow cel-go: a binary or unary operator sits at its operator token, a
field selection at its ``.``, an index at its ``[``, a call at its ``(``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

EXPR_START = ("{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, "
              "NUM_UINT, STRING, BYTES, IDENTIFIER}")
RESERVED = frozenset({"as", "break", "const", "continue", "else", "for", "function", "if", "import",
                      "let", "loop", "package", "namespace", "return", "var", "void", "while"})
_OPERATORS = ("==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "?", ":", ".", ",", "(", ")",
              "[", "]", "{", "}", "+", "-", "*", "/", "%")
_FLOAT = re.compile(r"\d+\.\d+([eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+([eE][+-]?\d+)?")
_INT = re.compile(r"0[xX][0-9a-fA-F]+|\d+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?"}
_START = frozenset({"[", "{", "(", ".", "-", "!", "true", "false", "null", "FLOAT", "INT", "UINT",
                    "STRING", "BYTES", "IDENT"})
# Tokens that may follow a complete operand (for "missing X at Y" decisions).
_AFTER_OPERAND = frozenset({"==", "!=", "<", "<=", ">", ">=", "in", "&&", "||", "+", "-", "*", "/",
                            "%", "?", ".", "["})


@dataclass(frozen=True)
class Token:
    kind: str  # an operator's text, "in"/"true"/..., or IDENT, INT, UINT, FLOAT, STRING, BYTES, EOF
    text: str
    pos: int  # character offset
    value: Any = None


@dataclass
class Node:
    """One CEL expression node: ``op`` is "lit", "ident", "select", "call", "list" or "map"."""

    op: str
    pos: int
    value: Any = None  # lit: the value; ident/select: the name; call: the function name
    args: list[Node] = field(default_factory=list)
    target: Node | None = None  # select: the operand; call: the receiver of a member call
    kind: str = ""  # lit: its CEL type name


@dataclass
class SyntaxIssue:
    pos: int
    message: str


class CelSyntaxError(Exception):
    def __init__(self, issues: list[SyntaxIssue]):
        super().__init__(issues[0].message if issues else "syntax error")
        self.issues = issues


# ----------------------------------------------------------------------------- lexer

def _scan_string(text: str, i: int) -> tuple[int, Any, str] | int:
    """A string or bytes literal at ``i``: (end, value, kind), or the index where it fails."""
    j, raw, is_bytes = i, False, False
    while j < len(text) and text[j] in "rRbB" and j - i < 2:
        raw |= text[j] in "rR"
        is_bytes |= text[j] in "bB"
        j += 1
    quote = text[j]
    triple = text.startswith(quote * 3, j)
    delim = quote * 3 if triple else quote
    j += len(delim)
    out: list[str] = []
    while True:
        if j >= len(text):
            return j
        if text.startswith(delim, j):
            value = "".join(out)
            return j + len(delim), value.encode() if is_bytes else value, "BYTES" if is_bytes else "STRING"
        c = text[j]
        if c in "\r\n" and not triple:
            return j
        if c == "\\" and not raw:
            if j + 1 >= len(text):
                return j + 1
            e = text[j + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                j += 2
                continue
            width = {"x": 2, "X": 2, "u": 4, "U": 8}.get(e)
            if width:
                digits = text[j + 2:j + 2 + width]
                bad = next((k for k, d in enumerate(digits) if d not in "0123456789abcdefABCDEF"), None)
                if bad is not None or len(digits) < width:
                    return j + 2 + (bad if bad is not None else len(digits))
                out.append(chr(int(digits, 16)))
                j += 2 + width
                continue
            if e in "0123":
                digits = text[j + 1:j + 4]
                bad = next((k for k, d in enumerate(digits) if d not in "01234567"), None)
                if bad is not None or len(digits) < 3:
                    return j + 1 + (bad if bad is not None else len(digits))
                out.append(chr(int(digits, 8)))
                j += 4
                continue
            return j + 1
        if c == "\\" and raw and j + 1 < len(text):
            out.append(text[j:j + 2])
            j += 2
            continue
        out.append(c)
        j += 1


def tokenize(text: str) -> tuple[list[Token], list[SyntaxIssue]]:
    """ANTLR's lexer: maximal munch; an unlexable run is reported and skipped."""
    tokens: list[Token] = []
    issues: list[SyntaxIssue] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n\f":
            i += 1
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        m = _FLOAT.match(text, i)
        if m:
            tokens.append(Token("FLOAT", m.group(), i, float(m.group())))
            i = m.end()
            continue
        m = _INT.match(text, i)
        if m:
            digits = m.group()
            number = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits)
            if m.end() < n and text[m.end()] in "uU":
                tokens.append(Token("UINT", text[i:m.end() + 1], i, number))
                i = m.end() + 1
            else:
                tokens.append(Token("INT", digits, i, number))
                i = m.end()
            continue
        prefix_match = re.match(r"[rR]?[bB]?|[bB]?[rR]?", text[i:i + 2])
        assert prefix_match is not None  # every alternative may match the empty string
        prefix = prefix_match.group()
        if i + len(prefix) < n and text[i + len(prefix)] in "'\"" and (prefix or c in "'\""):
            got = _scan_string(text, i)
            if isinstance(got, int):
                stop = min(got, n - 1) if got < n else n
                issues.append(SyntaxIssue(i, f"Syntax error: token recognition error at: '{text[i:stop + 1]}'"))
                i = got + 1 if got < n else n
                continue
            end, value, kind = got
            tokens.append(Token(kind, text[i:end], i, value))
            i = end
            continue
        m = _IDENT.match(text, i)
        if m:
            word = m.group()
            kind = word if word in ("true", "false", "null", "in") else "IDENT"
            value = {"true": True, "false": False}.get(word)
            tokens.append(Token(kind, word, i, value))
            i = m.end()
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is not None:
            tokens.append(Token(op, op, i))
            i += len(op)
            continue
        # Nothing starts here: "=", "&", "|" fail on the next character; others at once.
        stop = i + 1 if c in "=&|" and i + 1 < n else i
        issues.append(SyntaxIssue(i, f"Syntax error: token recognition error at: '{text[i:stop + 1]}'"))
        i = stop + 1
    tokens.append(Token("EOF", "<EOF>", n))
    return tokens, issues


# ---------------------------------------------------------------------------- parser

class _Stop(Exception):
    pass


class _Parser:
    def __init__(self, tokens: list[Token]):
        self.toks = tokens
        self.i = 0
        self.issues: list[SyntaxIssue] = []
        self.closers: list[str] = []  # what the enclosing constructs wait for, innermost last

    # -- helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def fail(self, token: Token, message: str) -> NoReturn:
        self.issues.append(SyntaxIssue(token.pos, f"Syntax error: {message}"))
        raise _Stop

    @staticmethod
    def shown(token: Token) -> str:
        return f"'{token.text}'"

    def may_follow(self, kind: str) -> bool:
        """Could ``kind`` come right after a complete operand here?"""
        if kind in _AFTER_OPERAND:
            return True
        if not self.closers:
            return kind == "EOF"
        return kind == self.closers[-1] or (kind == "," and self.closers[-1] in (")", "]", "}"))

    def expect(self, kind: str) -> Token:
        tok = self.tok
        if tok.kind == kind:
            self.i += 1
            return tok
        want = "<EOF>" if kind == "EOF" else f"'{kind}'"
        if self.peek().kind == kind:
            self.fail(tok, f"extraneous input {self.shown(tok)} expecting {want}")
        if kind != "EOF":
            self.closers.pop() if self.closers and self.closers[-1] == kind else None
            if self.may_follow(tok.kind):
                self.fail(tok, f"missing {want} at {self.shown(tok)}")
        self.fail(tok, f"mismatched input {self.shown(tok)} expecting {want}")

    # -- grammar (cel-go's CEL.g4)
    def start(self) -> Node:
        node = self.expr()
        self.expect("EOF")
        return node

    def expr(self) -> Node:
        cond = self.or_()
        if self.tok.kind != "?":
            return cond
        q = self.tok
        self.i += 1
        self.closers.append(":")
        then = self.or_()
        self.closers.pop()
        self.expect(":")
        other = self.expr()
        return Node("call", q.pos, "_?_:_", [cond, then, other])

    def or_(self) -> Node:
        left = self.and_()
        while self.tok.kind == "||":
            op = self.tok
            self.i += 1
            left = Node("call", op.pos, "_||_", [left, self.and_()])
        return left

    def and_(self) -> Node:
        left = self.relation()
        while self.tok.kind == "&&":
            op = self.tok
            self.i += 1
            left = Node("call", op.pos, "_&&_", [left, self.relation()])
        return left

    _RELATIONS = {"==": "_==_", "!=": "_!=_", "<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_",
                  "in": "@in"}

    def relation(self) -> Node:
        left = self.addition()
        while self.tok.kind in self._RELATIONS:
            op = self.tok
            self.i += 1
            left = Node("call", op.pos, self._RELATIONS[op.kind], [left, self.addition()])
        return left

    def addition(self) -> Node:
        left = self.multiplication()
        while self.tok.kind in ("+", "-"):
            op = self.tok
            self.i += 1
            left = Node("call", op.pos, f"_{op.kind}_", [left, self.multiplication()])
        return left

    def multiplication(self) -> Node:
        left = self.unary()
        while self.tok.kind in ("*", "/", "%"):
            op = self.tok
            self.i += 1
            left = Node("call", op.pos, f"_{op.kind}_", [left, self.unary()])
        return left

    def unary(self) -> Node:
        if self.tok.kind in ("!", "-"):
            ops = []
            kind = self.tok.kind
            while self.tok.kind == kind:
                ops.append(self.tok)
                self.i += 1
            if kind == "-" and self.tok.kind in ("INT", "FLOAT") and len(ops) % 2 == 1:
                lit = self.member()  # "-1" is a literal
                if lit.op == "lit" and lit.pos == ops[-1].pos + 1 and isinstance(lit.value, (int, float)):
                    lit.value, lit.pos = -lit.value, ops[-1].pos
                    ops = ops[:-1]
                    node = lit
                else:
                    node = lit
            else:
                node = self.member()
            name = "!_" if kind == "!" else "-_"
            for op in reversed(ops):
                node = Node("call", op.pos, name, [node])
            return node
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            tok = self.tok
            if tok.kind == ".":
                name = self.peek()
                if name.kind != "IDENT":
                    shown = tok.text + (name.text if name.kind != "EOF" else "")
                    self.fail(name, f"no viable alternative at input '{shown}'")
                self.i += 2
                if self.tok.kind == "(":
                    paren = self.tok
                    self.i += 1
                    node = Node("call", paren.pos, name.text, self.arguments(")"), target=node)
                else:
                    node = Node("select", tok.pos, name.text, target=node)
            elif tok.kind == "[":
                self.i += 1
                self.closers.append("]")
                index = self.expr()
                self.expect("]")
                self.closers.pop() if self.closers and self.closers[-1] == "]" else None
                node = Node("call", tok.pos, "_[_]", [node, index])
            else:
                return node

    def arguments(self, closer: str) -> list[Node]:
        args: list[Node] = []
        self.closers.append(closer)
        if self.tok.kind != closer:
            args.append(self.expr())
            while self.tok.kind == ",":
                self.i += 1
                if self.tok.kind == closer and closer != ")":
                    break  # lists and maps allow a trailing comma
                args.append(self.expr())
        self.expect(closer)
        self.closers.pop() if self.closers and self.closers[-1] == closer else None
        return args

    def primary(self) -> Node:
        tok = self.tok
        kind = tok.kind
        if kind == "IDENT" or (kind == "." and self.peek().kind == "IDENT"):
            if kind == ".":
                self.i += 1
                tok = self.tok
            if tok.text in RESERVED:
                self.fail(tok, f"reserved identifier: {tok.text}")
            self.i += 1
            if self.tok.kind == "(":
                paren = self.tok
                self.i += 1
                return Node("call", paren.pos, tok.text, self.arguments(")"))
            return Node("ident", tok.pos, tok.text)
        if kind == "(":
            self.i += 1
            self.closers.append(")")
            inner = self.expr()
            self.expect(")")
            self.closers.pop() if self.closers and self.closers[-1] == ")" else None
            return inner
        if kind == "[":
            self.i += 1
            return Node("list", tok.pos, None, self.arguments("]"))
        if kind == "{":
            self.i += 1
            return self.map_literal(tok)
        literal = {"INT": "int", "UINT": "uint", "FLOAT": "double", "STRING": "string", "BYTES": "bytes",
                   "true": "bool", "false": "bool", "null": "null_type"}.get(kind)
        if literal is not None:
            self.i += 1
            return Node("lit", tok.pos, tok.value, kind=literal)
        if self.peek().kind in _START:
            self.fail(tok, f"extraneous input {self.shown(tok)} expecting {EXPR_START}")
        self.fail(tok, f"mismatched input {self.shown(tok)} expecting {EXPR_START}")

    def map_literal(self, brace: Token) -> Node:
        entries: list[Node] = []
        self.closers.append("}")
        while self.tok.kind != "}":
            self.closers.append(":")
            key = self.expr()
            self.closers.pop()
            self.expect(":")
            entries += [key, self.expr()]
            if self.tok.kind != ",":
                break
            self.i += 1
        self.expect("}")
        self.closers.pop() if self.closers and self.closers[-1] == "}" else None
        return Node("map", brace.pos, None, entries)


def parse(text: str) -> Node:
    """The AST of ``text``; ``CelSyntaxError`` with cel-go's errors when it does not parse."""
    tokens, issues = tokenize(text)
    parser = _Parser(tokens)
    try:
        node = parser.start()
    except _Stop:
        node = None
    issues = sorted(issues + parser.issues, key=lambda s: s.pos)
    if issues or node is None:
        raise CelSyntaxError(issues)
    return node
