"""load_marked: PyYAML's safe loader plus a line for every key path and the text of every scalar."""

from __future__ import annotations

import pytest
import yaml

from deployctl.inventory.marked_yaml import load_marked

TEXT = """\
base: &b
  x: 1
  y: "two"
derived:
  <<: *b
  y: 3
  list: [a, 1.10, 010]
dup: 1
dup: 2
"""


def test_data_lines_and_raw_text() -> None:
    marked = load_marked(TEXT)
    assert marked.data == {"base": {"x": 1, "y": "two"}, "derived": {"y": 3, "list": ["a", 1.1, 8], "x": 1}, "dup": 1}
    assert marked.lines[("derived", "y")] == 6
    assert marked.lines[("derived", "x")] == 2  # merged: where it was written
    assert marked.raw[("derived", "list", 1)] == "1.10" and marked.raw[("derived", "list", 2)] == "010"
    assert marked.line_of(("derived", "list", 2, "missing")) == 7


def test_duplicate_keys_are_problems_and_the_first_value_is_kept() -> None:
    assert load_marked(TEXT).problems == [(9, ("dup",), "duplicate key (first set on line 8)")]


def test_safe_loader_refuses_python_tags() -> None:
    with pytest.raises(yaml.YAMLError):
        load_marked("x: !!python/object/apply:os.system ['true']\n")


def test_empty_document() -> None:
    assert load_marked("# nothing\n").data is None


@pytest.mark.parametrize("text", ["x: !!python/name:os.system\n", "x: !!set {a: null}\n", "x: !custom [1]\n"])
def test_only_plain_tags_are_accepted(text: str) -> None:
    with pytest.raises(yaml.YAMLError):
        load_marked(text)
