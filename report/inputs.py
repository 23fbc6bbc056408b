"""What the report reads, checked before it writes anything: the profile is one of the matrix's,
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


def check_tables(profile: str, roots: list[Path]) -> list[Path]:
    """Refuse a table that records another profile (results copied between profiles' folders
    would otherwise be reported under this one's name and GPU counts). Returns the files in the
    tables/ folders that no artifact wrote: the report never reads them."""
    targets = list(dict.fromkeys(e["target"] for e in mx.load_matrix()["experiments"].values()))
    stray: list[Path] = []
    for root in roots:
        folder = store.tables_dir(profile, root)
        known: set[str] = set()
        for path in (folder / f"{t}.json" for t in targets):
            if not path.is_file():
                continue
            try:
                meta = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise ReportError(f"{path} is not a table's JSON ({exc})") from exc
            made_for = meta.get("profile") if isinstance(meta, dict) else None
            if made_for != profile:
                raise ReportError(
                    f"{path} records profile '{made_for}', not '{profile}': results of "
                    f"'{made_for}' belong in {store.profile_dir(str(made_for), root)}"
                )
            known |= {path.name, f"{path.stem}.csv", *(meta.get("extra") or [])}
        stray += [p for p in sorted(folder.glob("*")) if p.name not in known
                  and not p.name.startswith(".")]  # fmt: skip
    return stray


def checked_roots(profile: str, results: list[Path] | None) -> list[Path]:
    """The results folders to report on, each checked; raises ReportError."""
    if profile not in mx.profiles():
        raise ReportError(f"unknown profile '{profile}'")
    roots = results or [store.results_root()]
    for r in roots:
        if not store.profile_dir(profile, r).is_dir():
            raise ReportError(f"{store.profile_dir(profile, r)} has no results: run "
                              f"`make all PROFILE={profile}` there first")  # fmt: skip
    stray = check_tables(profile, roots)
    if stray:
        print(f"note: not read, no artifact wrote them: {', '.join(map(str, stray))}",
              file=sys.stderr)  # fmt: skip
    return roots
