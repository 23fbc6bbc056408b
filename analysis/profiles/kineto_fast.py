"""The Kineto reader's optional fast decoder: msgspec, where it is installed (`pip install
.[fast]`); without it the standard library's json decodes every batch, with the same results.

json builds a dict for every element and for each of its args, most never read (instant events,
flows, the args of host calls): over half of a large trace's reading time. msgspec decodes a
batch of elements straight into the few fields the reader reads (Event, Args below), skipping
the others while still checking their JSON, in C: four times faster on a real 54 MB trace. Its
values are json's (numbers, strings, a repeated key's last value); where it refuses a batch that
json would read (NaN or Infinity, a number past a double, a lone surrogate, an element that is
not an object, args that are not an object), or where the batch is not JSON at all, the batch is
decoded by json as before, so a bad file's error line is json's, at its place.

msgspec is imported at the second batch of a trace (`decoder`), never for a small one: its
import costs a fifth of a small trace's whole reading. `name()` says which decoder reads (the
bench prints it).
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
    """The function decoding a JSON array's text into Events (None where msgspec refuses it), or
    None where msgspec is not installed; msgspec is imported at the first call."""
    global _ABSENT
    try:
        import msgspec
    except ImportError:  # the reader's own dependencies do not include it
        return None

    class Args(msgspec.Struct, gc=False):
        """The args the reader reads: a GPU event's device and stream, a copy's bytes."""

        device: Any = msgspec.UNSET
        bytes: Any = msgspec.UNSET
        stream: Any = msgspec.UNSET

    class Event(msgspec.Struct, gc=False):
        """An element of traceEvents as the reader reads it; absent fields as .get gives them."""

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
    """Which decoder reads a large trace's events: msgspec and its version, or json."""
    spec = importlib.util.find_spec("msgspec")
    if spec is None:
        return "json (standard library; the optional msgspec is not installed)"
    from importlib.metadata import version

    return f"msgspec {version('msgspec')} (optional, installed; json reads a trace's first batch)"


def records(events: list) -> Records:
    """(ts, dur, cat, name, event) of the complete events of a batch `decoder()` gave."""
    return Records([(e.ts, e.dur, e.cat, e.name, e) for e in events if e.ph == "X"])


def device(event: Any) -> Any:
    """A GPU event's args.device, else its pid (as kineto_fold reads json's dict)."""
    args = event.args
    return event.pid if args is None or args.device is _ABSENT else args.device


def nbytes(event: Any) -> Any:
    """A copy's args.bytes, 0 where it has none."""
    args = event.args
    return 0 if args is None or args.bytes is _ABSENT else args.bytes


def as_dict(event: Any) -> dict:
    """The pid, tid and args of an Event as json would have decoded them, the args with only the
    fields read (an empty dict reads as no args, as json's empty or foreign args do)."""
    args = event.args
    if args is not None:
        args = {
            k: v for k in ("device", "bytes", "stream") if (v := getattr(args, k)) is not _ABSENT
        }
    return {"pid": event.pid, "tid": event.tid, "args": args}
