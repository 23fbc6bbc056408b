"""The Kineto reader's optional fast decoder: msgspec, where installed (`pip install .[fast]`);
without it json decodes every batch, with the same results.

json builds a dict for every element and its args, most never read: over half of a large trace's
reading. msgspec decodes a batch straight into the few fields read (Event, Args), still checking
the JSON, in C: four times faster on a real 54 MB trace. Its values are json's; where it refuses
a batch json would read (NaN, a number past a double, a lone surrogate, an element or args not an
object) or one not JSON at all, json decodes it, so a bad file's error line is json's. msgspec is
imported at a trace's second batch, never for a small one (its import is a fifth of a small
trace's reading).
"""

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

_ABSENT: Any = None  # msgspec.UNSET once imported: a field the element does not hold


class Records(list):
    """A batch ready for kineto_fold.fold: (ts, dur, cat, name, event) of its complete events."""


@functools.cache
def decoder() -> Callable[[str], list | None] | None:
    """A function decoding a JSON array's text into Events (None where msgspec refuses it); None
    without msgspec."""
    global _ABSENT
    try:
        import msgspec
    except ImportError:  # the reader's own dependencies do not include it
        return None

    class Args(msgspec.Struct, gc=False):
        device: Any = msgspec.UNSET
        bytes: Any = msgspec.UNSET
        stream: Any = msgspec.UNSET

    class Event(msgspec.Struct, gc=False):
        """An element of traceEvents; absent fields as .get gives them."""

        ph: Any = None
        cat: Any = None
        name: Any = ""
        ts: Any = None
        dur: Any = None
        pid: Any = -1
        tid: Any = None
        args: Args | None = None

    _ABSENT = msgspec.UNSET
    decode = msgspec.json.Decoder(list[Event]).decode
    refused = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)

    def events(text: str) -> list | None:
        try:
            return decode(text)
        except refused:
            return None

    return events


def name() -> str:
    """Which decoder reads a large trace's events (the bench prints it)."""
    spec = importlib.util.find_spec("msgspec")
    if spec is None:
        return "json (standard library; the optional msgspec is not installed)"
    from importlib.metadata import version

    return f"msgspec {version('msgspec')} (optional, installed; json reads a trace's first batch)"


def records(events: list) -> Records:
    """(ts, dur, cat, name, event) of a decoded batch's complete events."""
    return Records([(e.ts, e.dur, e.cat, e.name, e) for e in events if e.ph == "X"])


def device(event: Any) -> Any:
    """A GPU event's args.device, else its pid."""
    args = event.args
    return event.pid if args is None or args.device is _ABSENT else args.device


def nbytes(event: Any) -> Any:
    """A copy's args.bytes, 0 where it has none."""
    args = event.args
    return 0 if args is None or args.bytes is _ABSENT else args.bytes


def looks_gpu(event: Any) -> bool:
    """kineto_fold._looks_gpu of an Event: an args.device or args.stream, a "stream N" thread."""
    args = event.args
    on_device = args is not None and (args.device is not _ABSENT or args.stream is not _ABSENT)
    return on_device or str(event.tid).startswith("stream")
