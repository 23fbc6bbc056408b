"""The text of a gzip'd Kineto trace for torch_trace's stream, inflated by one zlib object on a
thread of its own.

gzip.open under io.TextIOWrapper copies the text four times (buffered reader, member reader,
CRC pass, text wrapper) with several Python calls per piece. Here the file is inflated straight
to PIECE-byte pieces (zlib checks each member's CRC and length) and decoded once. As gzip.open:
members one after another, zero padding between or after them; EOFError for a stream cut short,
zlib.error for a corrupt one, UnicodeDecodeError for text not UTF-8, where the text before it
has been read. Inflating is a fifth of a large trace's reading, and zlib releases the GIL: the
thread inflates up to AHEAD pieces ahead, so the two overlap on a spare core (memory: AHEAD + 1
pieces).
"""

from __future__ import annotations

import codecs
import os
import queue
import threading
import zlib

RAW_BYTES = 1 << 17  # compressed bytes read at a time (gzip's own read size)
PIECE = 1 << 18  # inflated bytes handed over at a time (as torch_trace._CHUNK_CHARS)
AHEAD = 2  # pieces inflated ahead of the reader at most
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate stream
_CUT = "Compressed file ended before the end-of-stream marker was reached"


class GzipText:
    """read(n): the next text of a gzip file, at most n characters ('' at the end)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._raw = open(path, "rb")  # closed by close(), or the with block
        self._unzip = zlib.decompressobj(_GZIP_WBITS)
        self._pending = b""  # compressed input not inflated yet
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._left = b""  # inflated bytes handed over and not read yet
        self._done = False
        # inflated pieces, then b"" at the end, or the exception that stopped the inflating
        self._pieces: queue.Queue = queue.Queue(maxsize=AHEAD)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._inflate_all, daemon=True)
        self._thread.start()

    def __enter__(self) -> GzipText:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._raw.close()

    def read(self, size: int) -> str:
        while True:
            if self._left:
                piece, self._left = self._left[:size], self._left[size:]
                text = self._text.decode(piece)
                if text:
                    return text
                continue
            if self._done:
                return self._text.decode(b"", final=True)  # a character cut at the end raises
            item = self._pieces.get()
            if isinstance(item, BaseException):
                self._done = True
                raise item
            self._done, self._left = not item, item

    def _inflate_all(self) -> None:
        try:
            while not self._stop.is_set():
                data = self._inflate(PIECE)
                self._hand_over(data)
                if not data:
                    return
        except Exception as exc:  # EOFError, zlib.error, OSError: raised where read() meets it
            self._hand_over(exc)

    def _hand_over(self, item: bytes | BaseException) -> None:
        while not self._stop.is_set():  # a reader that stopped reading closes: then give up
            try:
                self._pieces.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _inflate(self, size: int) -> bytes:
        """At most `size` inflated bytes, b"" only at the end."""
        unzip = self._unzip
        while True:
            if unzip.eof:  # a member ended: zero padding, the end, or another member
                rest = unzip.unused_data.lstrip(b"\0")
                while not rest:
                    more = self._raw.read(RAW_BYTES)
                    if not more:
                        return b""
                    rest = more.lstrip(b"\0")
                self._unzip = unzip = zlib.decompressobj(_GZIP_WBITS)
                self._pending = rest
            if not self._pending:
                self._pending = self._raw.read(RAW_BYTES)
                if not self._pending:
                    raise EOFError(_CUT)
            data = unzip.decompress(self._pending, size)
            self._pending = unzip.unconsumed_tail
            if data:
                return data
