"""The house: imports go one way and never in a circle (README, "A map of the code").

run/ is laid out in floors: the ground (the modules directly in run/: store, errors, settings,
yamlfile), the node (what the machine offers), the
workloads (vision, llm), the sweep (the matrix and its execution), and on top what drives it
(checks, bench, assets). A module imports from its own package or from a lower floor, never from
a package beside it or above it. analysis/ and report/ read run/ only through modules that load
no torch, and run/ imports nothing of them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("run", "analysis", "report")
# The floor of each part of run/: a module may import only from its own part or a lower floor.
# The ground ("") is every module directly in run/; they import only each other and no circle.
FLOORS = {
    "": 0,
    "node": 1,
    "vision": 2,
    "llm": 2,
    "sweep": 3,
    "checks": 4,
    "bench": 4,
    "assets": 4,
}
# What analysis/ and report/ may import from run/: modules that load no torch, so tables and the
# report build from results alone.
READ_FROM_RUN = {
    "run.store",
    "run.errors",
    "run.program",
    "run.settings",
    "run.yamlfile",
    "run.node.profiling",
    "run.node.busy",  # the `beside` spec key noise.py groups by (issue 38)
    "run.sweep.matrix",
    # the vocabulary: templates, methods, data sets, strategies, loaders and their labels
    "run.llm.catalog",
    "run.llm.spec",
    "run.vision.spec",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}
    assert len(found) > 100, f"only {len(found)} modules found: wrong folder?"
    return found


def imports_of(path: Path, known: set[str], here: str | None = None) -> set[str]:
    """The project modules a file imports anywhere in it (function-level imports included),
    each resolved to the module it names (`from run.vision import spec` is run.vision.spec)."""
    here = here or module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names = [f"{base}.{alias.name}" for alias in node.names]
            names = [n if n in known else base for n in names]
        else:
            continue
        found |= {n for n in names if n.split(".")[0] in PACKAGES}
    return found - {here}


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(path, known) for name, path in mods.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def part(module: str) -> str:
    """The part of run/ a module belongs to: its subpackage, or "" for the ground floor."""
    return module.split(".")[1] if module.count(".") > 1 else ""


def test_no_import_circle_anywhere() -> None:
    graph = import_graph()
    assert circles(graph) == []
    assert sum(len(v) for v in graph.values()) > 200  # the scan sees the imports at all


def test_run_imports_go_down_the_floors() -> None:
    graph = import_graph()
    parts = {part(m) for m in graph if m.startswith("run.")} - {""}
    assert parts - set(FLOORS) == set(), "a new part of run/ needs its floor here"
    against = [
        f"{a} -> {b}"
        for a, targets in sorted(graph.items())
        if a.startswith("run.") and part(a) in FLOORS
        for b in sorted(targets)
        if b.startswith("run.")
        and part(b) != part(a)
        and not FLOORS.get(part(b), 99) < FLOORS[part(a)]
    ]
    assert against == []
    checked = sum(1 for a, t in graph.items() if a.startswith("run.") for b in t if b != "run")
    assert checked > 100


def test_the_floor_check_catches_an_import_against_the_order(tmp_path: Path) -> None:
    # a workload reaching up into the sweep, and one reaching sideways into the other
    up, side = "run.vision.spec", "run.llm.spec"
    graph = {up: {"run.sweep.matrix"}, side: {"run.vision.digits"}}
    bad = [
        (a, b)
        for a, ts in graph.items()
        for b in ts
        if part(b) != part(a) and not FLOORS[part(b)] < FLOORS[part(a)]
    ]
    assert bad == [(up, "run.sweep.matrix"), (side, "run.vision.digits")]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_run_imports_nothing_of_analysis_or_report() -> None:
    graph = import_graph()
    leaks = [
        f"{a} -> {b}"
        for a, ts in graph.items()
        if a.startswith("run.")
        for b in ts
        if b.split(".")[0] in ("analysis", "report")
    ]
    assert leaks == []


def test_analysis_imports_nothing_of_report() -> None:
    graph = import_graph()
    assert [a for a, ts in graph.items() if a.startswith("analysis") and any(
        b.startswith("report") for b in ts)] == []  # fmt: skip


def test_analysis_and_report_read_run_only_through_torch_free_modules() -> None:
    graph = import_graph()
    used = {
        b
        for a, ts in graph.items()
        if a.split(".")[0] in ("analysis", "report")
        for b in ts
        if b.startswith("run")
    }
    assert used and used <= READ_FROM_RUN, used - READ_FROM_RUN
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in sorted(READ_FROM_RUN))
        + "heavy = sorted(m for m in ('torch', 'torchtune', 'torchvision') if m in sys.modules)\n"
        + "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_scan_sees_function_level_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from analysis.profiles import ProfileError\n")
    assert imports_of(module, set(), here="run.m") == {"analysis.profiles"}
    module.write_text("def f():\n    from run.vision import spec\n    import run.store\n")
    assert imports_of(module, {"run.vision.spec"}, here="run.m") == {"run.vision.spec", "run.store"}


def test_no_module_of_run_or_analysis_is_over_about_400_lines() -> None:
    sizes = {
        str(p.relative_to(REPO)): len(p.read_text().splitlines())
        for pkg in ("run", "analysis")
        for p in (REPO / pkg).rglob("*.py")
    }
    assert len(sizes) > 100
    assert {f: n for f, n in sizes.items() if n > 420} == {}


def test_a_change_in_any_run_floor_makes_a_sweep_recheck(tmp_path: Path) -> None:
    """The Makefile's RUN_SRC finds sources in every subfolder of the floors a run is made of;
    benchmarks, checks and asset fetching change no run."""
    results = tmp_path / "results"
    make = ["make", "--no-print-directory", "-n", f"RESULTS_DIR={results}", "PROFILE=smoke"]
    sys.path.insert(0, str(Path(__file__).parent))
    from made_runs import fabricate

    # V3's record and runs as its sweep leaves them, newer than every source: up to date
    [sweep] = fabricate(results, "smoke", ["V3"])

    def stale(*changed: str) -> bool:
        """Whether make would run V3's sweep again if these files changed (-n: only print)."""
        pretend = [f"--what-if={c}" for c in changed]
        out = subprocess.run(
            [*make, *pretend, str(sweep)], cwd=REPO, capture_output=True, text=True
        ).stdout
        return "-m run.sweep --scale smoke --exp V3" in out

    assert not stale()
    deep = [
        "run/vision/train.py",
        "run/llm/launch.py",
        "run/node/profiling.py",
        "run/sweep/runner.py",
        "run/store.py",
        "experiments/matrix.yaml",
    ]
    for source in deep:
        assert (REPO / source).is_file(), source
        assert stale(source), f"a change in {source} would not re-check the sweep"
    assert not stale("run/bench/optimize.py")
    assert not stale("run/checks/cases.py")
