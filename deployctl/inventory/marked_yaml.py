"""YAML with line numbers: PyYAML's safe loader, plus where every key was written.

``yaml.safe_load`` forgets positions and silently keeps the last of two equal keys. Operators need
``FILE:LINE`` in every error and a duplicated key is almost always a mistake, so this composes the
node tree with ``SafeLoader`` (same tags, same safety) and builds the data itself, recording for every
key path the line it is on and, for scalars, the text exactly as written.

Aliases are expanded here, so this is also where hostile YAML is bounded: an alias that refers to a
node it is inside of is refused (PyYAML would build a cyclic object and the checks would recurse
without end), and the document may expand to at most ``MAX_NODES`` nodes (a 342-byte "billion
laughs" otherwise takes minutes and gigabytes), and nest at most ``MAX_DEPTH`` deep. Each raises
``HostileYaml`` with the line and key path where it starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[Any, ...]
_MERGE_TAG = "tag:yaml.org,2002:merge"
MAX_NODES = 20_000  # a large real inventory has a few thousand
MAX_DEPTH = 64
_COLLECTION_TAGS = {"sequence": ("tag:yaml.org,2002:seq",), "mapping": ("tag:yaml.org,2002:map",)}


@dataclass
class MarkedYaml:
    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    raw: dict[Path, str] = field(default_factory=dict)
    # (line, path, message) for structural mistakes the data cannot show, e.g. duplicate keys.
    problems: list[tuple[int, Path, str]] = field(default_factory=list)
    nodes: int = 0  # built so far, aliases expanded
    building: set[int] = field(default_factory=set)  # ids of the collection nodes being built (the stack)

    def line_of(self, path: Path) -> int:
        """The line of ``path``, or of its nearest ancestor that was written in the file."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return 1


def load_marked(text: str) -> MarkedYaml:
    """Parse one YAML document. Raises ``yaml.YAMLError`` (with a mark) on a syntax error."""
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        out = MarkedYaml(data=None)
        if node is not None:
            out.lines[()] = node.start_mark.line + 1
            out.data = _build(loader, node, (), out)
        return out
    finally:
        loader.dispose()


class HostileYaml(yaml.YAMLError):
    """YAML that is well formed but would not end (a cyclic alias) or would not fit (an alias bomb)."""

    def __init__(self, line: int, path: Path, message: str) -> None:
        super().__init__(message)
        self.line, self.path, self.message = line, path, message


def _too_deep(line: int, path: Path) -> HostileYaml:
    return HostileYaml(line, path, f"nested more than {MAX_DEPTH} levels deep")


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that stops at ``MAX_DEPTH`` levels of brackets or indentation while scanning: PyYAML's
    scanner is quadratic in the nesting level (10 kB of ``[`` take a minute) and its composer recursive."""

    def fetch_more_tokens(self) -> None:
        if self.flow_level > MAX_DEPTH or len(self.indents) > MAX_DEPTH:
            raise _too_deep(self.line + 1, ())
        super().fetch_more_tokens()


def _build(loader: yaml.SafeLoader, node: yaml.Node, path: Path, out: MarkedYaml) -> Any:
    out.nodes += 1
    if out.nodes > MAX_NODES:
        # Reported at the top-level key whose expansion went too far: inside it, every line is an anchor's.
        raise HostileYaml(out.line_of(path[:1]), path[:1], f"expands to more than {MAX_NODES} values (aliases"
                          " repeated inside aliases?); write the values out instead")
    if isinstance(node, yaml.ScalarNode):
        out.raw[path] = node.value
        return loader.construct_object(node, deep=True)
    if node.tag not in _COLLECTION_TAGS.get(node.id, ()):
        # Only plain lists and mappings: a tag such as !!python/object is refused, never interpreted.
        raise yaml.constructor.ConstructorError(
            None, None, f"unsupported YAML tag {node.tag!r}", node.start_mark)
    if id(node) in out.building:
        raise HostileYaml(out.line_of(path), path, "an alias refers to a node that contains it (a cycle)")
    if len(path) > MAX_DEPTH:
        raise _too_deep(out.line_of(path[:1]), path[:1])
    out.building.add(id(node))
    try:
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                out.lines[path + (index,)] = item.start_mark.line + 1
                items.append(_build(loader, item, path + (index,), out))
            return items
        return _build_mapping(loader, node, path, out)
    finally:
        out.building.discard(id(node))


def _build_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, path: Path, out: MarkedYaml) -> dict:
    result: dict[Any, Any] = {}
    merges: list[yaml.Node] = []
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE_TAG:
            merges.extend(value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node])
            continue
        line = key_node.start_mark.line + 1
        if not isinstance(key_node, yaml.ScalarNode):
            out.problems.append((line, path, "a key must be a plain scalar, not a list or mapping"))
            continue
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            key = key_node.value
        if key in result:
            first = out.lines.get(path + (key,), line)
            out.problems.append((line, path + (key,), f"duplicate key (first set on line {first})"))
            continue
        out.lines[path + (key,)] = line
        result[key] = _build(loader, value_node, path + (key,), out)
    # YAML merge keys (<<: *anchor): explicit keys win, earlier merges win over later ones (as PyYAML).
    for merged in merges:
        if not isinstance(merged, yaml.MappingNode):
            out.problems.append((merged.start_mark.line + 1, path, "'<<' must merge a mapping"))
            continue
        if id(merged) in out.building:
            raise HostileYaml(out.line_of(path), path, "'<<' merges a mapping that contains it (a cycle)")
        scratch = MarkedYaml(data=None, nodes=out.nodes, building=out.building)
        for key, value in _build_mapping(loader, merged, path, scratch).items():
            if key not in result:
                result[key] = value
        for table, source in ((out.lines, scratch.lines), (out.raw, scratch.raw)):
            for sub_path, item in source.items():
                table.setdefault(sub_path, item)
        out.problems.extend(scratch.problems)
        out.nodes = scratch.nodes
    return result
