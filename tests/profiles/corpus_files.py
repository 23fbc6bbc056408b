"""Where the corpus of real profiles made by others lies (../shared/profiles/, SOURCES.md).

A plain module (not conftest) so test files can import it by a name no other folder uses. The
folder is found beside the checkout (`../shared/profiles`, as in CI's clean clone and the main
checkout), beside the main checkout of a git worktree, or where PROFILE_CORPUS points; the tests
that need it skip with the reason where it is absent. The files are read where they lie, never
copied into the project.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = "PROFILE_CORPUS"


def _main_checkout(repo: Path) -> Path | None:
    """The main checkout of a git worktree (its .git is a file naming .../.git/worktrees/NAME)."""
    dot_git = repo / ".git"
    if not dot_git.is_file():
        return None
    text = dot_git.read_text(errors="replace").strip()
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text.removeprefix("gitdir:").strip())
    return gitdir.parents[2] if gitdir.parent.name == "worktrees" else None


def _candidates() -> list[Path]:
    found = [Path(os.environ[ENV])] if os.environ.get(ENV) else []
    found.append(REPO.parent / "shared" / "profiles")
    main = _main_checkout(REPO)
    if main is not None:
        found.append(main.parent / "shared" / "profiles")
    return found


def corpus_dir() -> Path | None:
    """The corpus folder (it holds SOURCES.md), or None where there is none."""
    return next((p for p in _candidates() if (p / "SOURCES.md").is_file()), None)


CORPUS = corpus_dir()
ABSENT = (
    f"no corpus of real profiles: none of {', '.join(map(str, _candidates()))} holds SOURCES.md"
)
needs_corpus = pytest.mark.skipif(CORPUS is None, reason=ABSENT)


def corpus_files(kind: str) -> list[Path]:
    """The corpus's files of one kind ("nsys" or "kineto"), sorted; [] where it is absent."""
    if CORPUS is None:
        return []
    return sorted(p for p in (CORPUS / kind).iterdir() if p.is_file())


def corpus_file(name: str) -> Path:
    """One corpus file by name (under nsys/ or kineto/); the test skips where it is absent."""
    for kind in ("nsys", "kineto"):
        path = CORPUS / kind / name if CORPUS is not None else None
        if path is not None and path.is_file():
            return path
    pytest.skip(f"{name}: {ABSENT if CORPUS is None else 'not in ' + str(CORPUS)}")
