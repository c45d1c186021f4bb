"""Facts read from a real SGLang wheel's source, for the conformance suite (tests/adapters/test_sglang_conformance.py).

Only ``ast`` and the wheel as a zip: nothing of SGLang (or torch) is imported or run. Each wheel is read once
per session (``source(version)`` is cached) and each fact is computed once on first use.

- ``defaults()``: the ServerArgs fields' literal defaults (the dataclass up to 0.5.10, the msgspec namespace
  Structs of ``arg_groups/fields/`` in 0.5.23), with where each is defined.
- ``produced_by(line)``: the string template of a call (a logger call, a raised exception, a tqdm desc) that
  prints ``line``: an f-string's literal parts kept, its fields as wildcards, ``%s``/``{}`` placeholders too.
- ``metrics()``: every ``Gauge``/``Counter``/``Histogram`` of the metrics collector: name (a Counter's without
  the ``_total`` prometheus_client adds), kind, label names, literal buckets.
- ``class_fields(path, cls)`` and ``has_string(path, text)``: request structs and the serving code's keys.
"""

from __future__ import annotations

import ast
import re
import zipfile
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from support.sglang_wheels import wheel

UNKNOWN = object()  # a default that is not a literal (computed, a factory): not compared
_PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdfrixg]|\{[^{}]*\}")
_WILD = "(.*?)"
_METRIC_KINDS = ("Gauge", "Counter", "Histogram", "Summary")
# Code that is not the language-model server's: the diffusion server, benchmarks, tests.
_NOT_THE_SERVER = ("sglang/multimodal_gen/", "sglang/benchmark/", "sglang/test/", "sglang/bench_")
_COLLECTORS = ("sglang/srt/metrics/collector.py", "sglang/srt/observability/metrics_collector.py")


@dataclass(frozen=True)
class Template:
    pattern: re.Pattern[str]
    text: str      # the template as written, wildcards shown as {…}
    where: str     # file.py:LINE
    literal: int   # characters of its literal parts
    head: int      # characters of the literal it starts with (0: it starts with a field)

    def prints(self, line: str) -> bool:
        """Whether it prints ``line`` by its literal parts: f"{action} failed: {msgs}" would match most
        lines with " failed: " in them, so a template must carry 20 literal characters, 40 % of the line, or
        start with 10 of its own (``server_args={…}`` before a dump of thousands)."""
        return (self.literal >= 20 or self.literal >= 0.4 * len(line) or self.head >= 10) \
            and self.pattern.fullmatch(line) is not None


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    labels: tuple[str, ...] | None   # None: not a literal the suite can read
    buckets: tuple[float, ...] | None
    where: str


def where(path: str, line: int) -> str:
    return f"{path.removeprefix('sglang/srt/').removeprefix('sglang/')}:{line}"


def _pieces(node: ast.expr) -> list[str | None] | None:
    """Literal strings and None (a wildcard) making up a string expression; None if it is not one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        out: list[str | None] = []
        last = 0
        for match in _PLACEHOLDER.finditer(node.value):
            out += [node.value[last:match.start()], None]
            last = match.end()
        return out + [node.value[last:]]
    if isinstance(node, ast.JoinedStr):
        return [v.value if isinstance(v, ast.Constant) else None for v in node.values]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = _pieces(node.left)
        if left is None:
            return None
        if isinstance(node.op, ast.Mod):
            return left
        right = _pieces(node.right)
        return left + (right if right is not None else [None])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _pieces(node.func.value)
    return None


def _line_templates(pieces: list[str | None], where_: str) -> list[Template]:
    """One template per printed line (a literal ``\\n`` starts a new one)."""
    lines: list[list[str | None]] = [[]]
    for piece in pieces:
        if piece is None:
            lines[-1].append(None)
            continue
        first, *rest = piece.split("\n")
        lines[-1].append(first)
        lines += [[part] for part in rest]
    out = []
    for line in lines:
        if line and isinstance(line[-1], str):
            line[-1] = line[-1].rstrip()  # a reader of the log strips the line's end (SGLang leaves blanks)
        literal = "".join(p for p in line if p)
        if len(literal.strip()) < 4:
            continue
        out.append(_template("".join(_regex(line)), "".join(_text(line)), where_, line))
    return out


def _template(regex: str, text: str, where_: str, pieces: list[str | None]) -> Template:
    head = pieces[0] if pieces and isinstance(pieces[0], str) else ""
    return Template(re.compile(regex, re.DOTALL), text, where_, sum(len(p) for p in pieces if p), len(head))


def _regex(pieces: list[str | None]) -> list[str]:
    return [_WILD if p is None else re.escape(p) for p in pieces]


def _text(pieces: list[str | None]) -> list[str]:
    return ["{…}" if p is None else p for p in pieces]


def _built_messages(tree: ast.Module, path: str) -> list[Template]:
    """Messages a function builds piece by piece (``msg = f"Prefill batch, …"``, then ``msg += f", …"`` under
    conditions) before logging them: the first piece, then any of the later ones, in source order."""
    out = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        steps: dict[str, list[tuple[int, bool, list[str | None]]]] = {}
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target, value, first = node.targets[0].id, node.value, True
            elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
                target, value, first = node.target.id, node.value, False
            else:
                continue
            pieces = _pieces(value)
            if pieces is not None:
                steps.setdefault(target, []).append((node.lineno, first, pieces))
        for target, found in steps.items():
            found.sort(key=lambda step: step[0])
            head = "".join(p or "" for p in found[0][2])
            if len(found) < 2 or not found[0][1] or len(head.strip()) < 4:
                continue  # not a message (``text = ""`` then ``text += …`` matches anything)
            if any(p and "\n" in p for _, _, pieces in found for p in pieces):
                continue
            regex = "".join(_regex(found[0][2])) + "".join(f"(?:{''.join(_regex(p))})?" for _, _, p in found[1:])
            text = "".join(_text(found[0][2])) + "".join(f"[{''.join(_text(p))}]" for _, _, p in found[1:])
            out.append(_template(regex, text, where(path, found[0][0]),
                                 [p for _, _, pieces in found for p in pieces]))
    return out


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return UNKNOWN
    if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "field":
        for kw in node.keywords:
            if kw.arg == "default":
                return _literal(kw.value)
        return UNKNOWN
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


class WheelSource:
    """One wheel's Python source, parsed lazily, file by file."""

    def __init__(self, version: str, path: Path) -> None:
        self.version = version
        with zipfile.ZipFile(path) as zf:
            self.texts = {n: zf.read(n).decode("utf-8-sig", "replace") for n in zf.namelist()
                          if n.startswith("sglang/") and n.endswith(".py")}
        self._templates: dict[str, list[Template]] = {}
        self._by_lead: dict[str, list[Template]] = {}

    @lru_cache(maxsize=None)
    def tree(self, path: str) -> ast.Module:
        return ast.parse(self.texts[path], filename=path)

    def templates(self, path: str) -> list[Template]:
        if path not in self._templates:
            found = []
            for node in ast.walk(self.tree(path)):
                if isinstance(node, ast.Call):
                    for arg in [*node.args, *(kw.value for kw in node.keywords)]:
                        pieces = _pieces(arg)
                        if pieces is not None:
                            found += _line_templates(pieces, where(path, arg.lineno))
            found += _built_messages(self.tree(path), path)
            self._templates[path] = found
        return self._templates[path]

    def produced_by(self, line: str) -> Template | None:
        """The first template that prints ``line``. Parsing every file would take minutes on 0.5.23, so only
        the files holding the line's leading words or one of its three longest words-only runs are read, those
        holding most of its first ten runs first, until one matches."""
        # Lines that start alike (another rank's, another model's dump) are first tried on the templates found
        # for the earlier ones.
        lead = re.match(r"[A-Za-z_ ]*", line).group(0)[:30]  # type: ignore[union-attr]
        known = next((t for t in self._by_lead.get(lead, ()) if t.prints(line)), None)
        if known is not None:
            return known
        runs = [r.strip() for r in re.split(r"[^A-Za-z_ ]+", line) if len(r.strip()) >= 5]
        leading = [runs[0]] if runs and line.startswith(runs[0]) else []
        keys = list(dict.fromkeys(leading + sorted(runs, key=len, reverse=True)[:3]))
        paths = [p for p, text in self.texts.items() if not p.startswith(_NOT_THE_SERVER) and any(k in text for k in keys)]
        score = {p: sum(r in self.texts[p] for r in runs[:10]) for p in paths}
        for path in sorted(paths, key=lambda p: (-score[p], p)):
            found = next((t for t in self.templates(path) if t.prints(line)), None)
            if found is not None:
                self._by_lead.setdefault(lead, []).append(found)
                return found
        return None

    @cached_property
    def defaults(self) -> dict[str, tuple[Any, str]]:
        """ServerArgs field → (literal default or UNKNOWN, where)."""
        out: dict[str, tuple[Any, str]] = {}
        paths = sorted(p for p in self.texts if p.startswith("sglang/srt/arg_groups/fields/"))
        for path in paths or ["sglang/srt/server_args.py"]:
            for cls in self.tree(path).body:
                if not isinstance(cls, ast.ClassDef) or (not paths and cls.name != "ServerArgs"):
                    continue
                for stmt in cls.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                            and not stmt.target.id.startswith("_"):
                        out.setdefault(stmt.target.id, (_literal(stmt.value), where(path, stmt.lineno)))
        return out

    @cached_property
    def collector(self) -> str:
        return next(p for p in _COLLECTORS if p in self.texts)

    @cached_property
    def metrics(self) -> dict[str, Metric]:
        path = self.collector
        out: dict[str, Metric] = {}
        funcs = [(cls.name, f) for cls in self.tree(path).body if isinstance(cls, ast.ClassDef)
                 for f in ast.walk(cls) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for owner, func in funcs:
            lists = _list_assignments(func)
            for node in ast.walk(func):
                if not (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in _METRIC_KINDS):
                    continue
                kw = {k.arg: k.value for k in node.keywords if k.arg}
                name = _literal(kw.get("name", node.args[0] if node.args else None))
                if not isinstance(name, str):
                    continue
                kind = ast.unparse(node.func).split(".")[-1]
                if kind == "Counter":
                    name = name.removesuffix("_total")
                buckets = kw.get("buckets")
                if isinstance(buckets, ast.Name):
                    buckets = lists.get(buckets.id)
                values = _literal(buckets)
                labels = _labels(kw.get("labelnames"))
                if labels is not None and "*" in labels:  # the labels dict its caller passes
                    base = self.labels_of("tp_rank" if owner.startswith("Scheduler") else None)
                    labels = tuple(sorted(set(labels) - {"*"} | set(base)))
                out.setdefault(name, Metric(name, kind, labels,
                                            tuple(float(b) for b in values) if isinstance(values, list) else None,
                                            where(path, node.lineno)))
        return out

    @lru_cache(maxsize=None)
    def labels_of(self, rank_key: str | None) -> tuple[str, ...]:
        """The label names a collector's caller passes: the literal dict with ``model_name`` and, for the
        scheduler's, ``tp_rank`` (the tokenizer's has none). Later ``if``s add dp_rank with data parallelism,
        priority with priority scheduling and the operator's extra labels: not in a default server's."""
        paths = [p for p in ("sglang/srt/managers/tokenizer_manager.py", "sglang/srt/managers/scheduler_metrics_mixin.py",
                             "sglang/srt/observability/scheduler_metrics_mixin.py", self.collector) if p in self.texts]
        for path in paths:
            for node in ast.walk(self.tree(path)):
                if isinstance(node, ast.Dict):
                    keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
                    if "model_name" in keys and (rank_key in keys if rank_key else "tp_rank" not in keys):
                        return tuple(sorted(keys))
        raise AssertionError(f"sglang {self.version}: no metrics labels dict (with {rank_key or 'model_name'}) found")

    def class_fields(self, path: str, cls: str) -> tuple[frozenset[str], str]:
        for node in ast.walk(self.tree(path)):
            if isinstance(node, ast.ClassDef) and node.name == cls:
                names = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
                return frozenset(names), where(path, node.lineno)
        return frozenset(), where(path, 0)

    def has_string(self, path: str, text: str) -> str | None:
        """Where ``text`` is a string constant (a dict key, a subscript) in ``path``; None if nowhere."""
        for node in ast.walk(self.tree(path)):
            if isinstance(node, ast.Constant) and node.value == text:
                return where(path, node.lineno)
        return None


def _list_assignments(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """A function's parameters' literal defaults and ``name = [..]`` assignments (the bucket lists)."""
    out: dict[str, ast.expr] = {}
    args = func.args.args[len(func.args.args) - len(func.args.defaults):]
    for arg, default in zip(args, func.args.defaults):
        if isinstance(default, (ast.List, ast.Tuple)):
            out[arg.arg] = default
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, node.value)
    return out


def _labels(node: ast.expr | None) -> tuple[str, ...] | None:
    """``labels.keys()`` is the collector's base labels ("*"); ``list(labels.keys()) + ["x"]`` adds x."""
    if node is None:
        return ()
    text = ast.unparse(node)
    if text in ("labels.keys()", "list(labels.keys())", "self.labels.keys()"):
        return ("*",)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _labels(node.left), _labels(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.List) and any(isinstance(e, ast.Starred) for e in node.elts):
        parts = [_labels(e.value) if isinstance(e, ast.Starred) else _labels(ast.List([e])) for e in node.elts]
        return None if None in parts else tuple(x for p in parts for x in p)  # type: ignore[union-attr]
    value = _literal(node)
    return tuple(value) if isinstance(value, (list, tuple)) else None


@lru_cache(maxsize=None)
def source(version: str) -> WheelSource:
    return WheelSource(version, wheel(version))
