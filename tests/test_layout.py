"""Imports go one way: run/ -> nothing of analysis/ or report/; analysis/ -> no report/."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def imported_packages(path: Path) -> set[str]:
    """Top-level packages a module imports anywhere in it (function-level imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def offenders(package: str, forbidden: set[str]) -> list[str]:
    files = sorted((REPO / package).rglob("*.py"))
    assert len(files) > 5, f"{package}/ holds only {len(files)} modules: wrong folder?"
    return [
        f"{f.relative_to(REPO)} imports {sorted(imported_packages(f) & forbidden)}"
        for f in files
        if imported_packages(f) & forbidden
    ]


def test_run_imports_nothing_of_analysis_or_report() -> None:
    assert offenders("run", {"analysis", "report"}) == []


def test_analysis_imports_nothing_of_report() -> None:
    assert offenders("analysis", {"report"}) == []


def test_the_scan_sees_function_level_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from analysis.profiles import ProfileError\n")
    assert imported_packages(module) == {"analysis"}
