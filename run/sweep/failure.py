"""Why a run failed, from its log: the child's own error line or the signal that ended it.

A failed torchrun launch ends its log with torchrun's own report (`ChildFailedError` and a
"Root Cause (first observed failure)" block); the line a reader needs is earlier: the exception
of the rank that failed first (torch prefixes a child's traceback with `[rankN]:`), or, when the
process was killed, the signal. A rank killed by the kernel's out-of-memory killer dies of
SIGKILL without a word, and the other ranks then report broken connections: those are echoes,
not causes.
"""

from __future__ import annotations

import re
import signal

# torchrun's wrappers around a child's failure: never the cause
WRAPPERS = ("ChildFailedError", "SignalException")
# what the surviving ranks say once a peer is gone
ECHOES = re.compile(
    r"DistBackendError|Connection closed by peer|Connection reset by peer|Broken pipe|"
    r"NCCL communicator was aborted|Watchdog caught collective operation timeout|"
    r"ProcessGroupGloo.*(?:timed out|closed)",
    re.IGNORECASE,
)
_EXCEPTION = re.compile(
    r"^\s*(?:\[rank(?P<rank>\d+)\]:\s*)?"
    r"(?P<name>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit))"
    r"(?::\s?(?P<msg>.*))?$"
)
_OWN_ERROR = re.compile(r"^\s*(?:\[rank\d+\]:\s*)?(?P<line>error: .+)$")
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
MAX_CHARS = 500


def signal_text(signum: int) -> str:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    if signum == signal.SIGKILL:
        return f"killed ({name}), likely out of host memory"
    return f"killed ({name})"


def root_cause(log_text: str, returncode: int | None = None) -> str:
    """One line saying why a run failed (see the module docstring)."""
    lines = log_text.splitlines()
    for line in lines:
        own = _OWN_ERROR.match(line)
        if own:
            return own.group("line")[:MAX_CHARS]

    # torchrun's report names the rank that failed first and its exit code
    root_rank = exitcode = None
    if "Root Cause" in log_text:
        tail = lines[next(i for i, ln in enumerate(lines) if "Root Cause" in ln) :]
        for line in tail:
            if root_rank is None and (m := _ROOT_RANK.match(line)):
                root_rank = int(m.group(1))
            if exitcode is None and (m := _EXITCODE.match(line)):
                exitcode = int(m.group(1))
    if exitcode is not None and exitcode < 0:
        return signal_text(-exitcode)
    if returncode is not None and returncode < 0:
        return signal_text(-returncode)

    found = []  # (is an echo, not of the root rank, position, text)
    for pos, line in enumerate(lines):
        m = _EXCEPTION.match(line)
        if not m or m.group("name").split(".")[-1] in WRAPPERS:
            continue
        rank = int(m.group("rank")) if m.group("rank") else None
        text = f"{m.group('name')}: {m.group('msg') or ''}".rstrip(": ").strip()
        other_rank = root_rank is not None and rank is not None and rank != root_rank
        found.append((bool(ECHOES.search(line)), other_rank, -pos, text))
    if found:
        # a cause before an echo, the root rank before the others, then the last one printed
        # (Python prints the exception a process died of last)
        return min(found)[3][:MAX_CHARS]
    tail = [ln.strip() for ln in lines if ln.strip()]
    if exitcode is not None:
        return f"exit code {exitcode}: {tail[-1][:MAX_CHARS]}" if tail else f"exit code {exitcode}"
    return tail[-1][:MAX_CHARS] if tail else "no output"
