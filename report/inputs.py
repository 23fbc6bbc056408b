"""What the report reads, checked before it writes anything: the scale is one of the matrix's,
each results folder has it, and every table there was made for it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from run import store
from run.errors import UserError
from run.sweep import matrix as mx


class ReportError(UserError):
    """What stops the report before anything is written: one line for the user."""


def check_tables(scale: str, roots: list[Path]) -> list[Path]:
    """Refuse a table that records another scale (results copied between scales' folders
    would otherwise be reported under this one's name and GPU counts). Returns the files in the
    tables/ folders that no artifact wrote: the report never reads them."""
    targets = list(dict.fromkeys(e["target"] for e in mx.load_matrix()["experiments"].values()))
    stray: list[Path] = []
    for root in roots:
        folder = store.tables_dir(scale, root)
        known: set[str] = set()
        for path in (folder / f"{t}.json" for t in targets):
            if not path.is_file():
                continue
            try:
                meta = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise ReportError(f"{path} is not a table's JSON ({exc})") from exc
            made_for = meta.get("scale") if isinstance(meta, dict) else None
            if made_for != scale:
                raise ReportError(
                    f"{path} records scale '{made_for}', not '{scale}': results of "
                    f"'{made_for}' belong in {store.scale_dir(str(made_for), root)}"
                )
            known |= {path.name, f"{path.stem}.csv", *(meta.get("extra") or [])}
        stray += [p for p in sorted(folder.glob("*")) if p.name not in known
                  and not p.name.startswith(".")]  # fmt: skip
    return stray


def checked_roots(scale: str, results: list[Path] | None) -> list[Path]:
    """The results folders to report on, each checked; raises ReportError."""
    if scale not in mx.scales():
        raise ReportError(f"unknown scale '{scale}'")
    roots = results or [store.results_root()]
    for r in roots:
        if not store.scale_dir(scale, r).is_dir():
            raise ReportError(f"{store.scale_dir(scale, r)} has no results: run "
                              f"`make all PROFILE={scale}` there first")  # fmt: skip
    stray = check_tables(scale, roots)
    if stray:
        print(f"note: not read, no artifact wrote them: {', '.join(map(str, stray))}",
              file=sys.stderr)  # fmt: skip
    return roots
