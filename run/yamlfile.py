"""Strict YAML files: the matrix, the claims and the LLM configs are read through `load`.

PyYAML's safe_load keeps the last of two equal keys (a copied experiment id silently replaces the
first) and a syntax error is a traceback. `load` refuses a duplicated key (naming it, the file and
both lines) and turns every YAML error into one line, `<file>:<line>: <problem>`, raised as the
caller's own error class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from run.errors import UserError

MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlError(UserError):
    """A YAML file that cannot be read, does not parse or repeats a key."""


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A key given twice in one mapping; a MarkedYAMLError, so it is reported as the others."""


# libyaml's parser where PyYAML was built with it: ten times faster on the matrix (0.20 -> 0.02 s),
# which every program and make call reads; the constructor below is Python's either way.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_SAFE_LOADER):  # type: ignore[misc,valid-type]
    """SafeLoader whose mappings refuse a key they already hold."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                # `<<: *base` followed by a key of base is YAML's override, not a repeat
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # an unhashable key: SafeLoader's own error says so
                    continue
                if first is not key_node:
                    raise DuplicateKeyError(
                        problem=f"duplicate key {key!r} (first at line {first.start_mark.line + 1})",
                        problem_mark=key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


def one_line(exc: yaml.YAMLError, path: Path | str, text: str = "") -> str:
    """`<file>:<line>: <problem>` for any YAML error, with its context when it has one."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        line = f"{path}:{exc.problem_mark.line + 1}: {exc.problem}"
        if exc.context:
            where = exc.context_mark
            at = f" at line {where.line + 1}" if where is not None else ""
            line += f" ({exc.context}{at})"
        return " ".join(line.split())
    if isinstance(exc, yaml.reader.ReaderError) and isinstance(exc.character, int):
        # a character YAML does not allow: the reader knows its offset, not its line (libyaml's
        # offset counts the bytes of the UTF-8 text it was given, Python's the characters)
        if _SAFE_LOADER is yaml.SafeLoader:
            line_no = text.count("\n", 0, exc.position) + 1
        else:
            line_no = text.encode()[: exc.position].count(b"\n") + 1
        return f"{path}:{line_no}: character #x{exc.character:04x}: {exc.reason}"
    return f"{path}: {' '.join(str(exc).split())}"


def load(path: Path | str, error: type[Exception] = YamlError) -> Any:
    """The data of a YAML file, read strictly; any problem is one line raised as `error`."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise error(one_line(exc, path, text)) from None
