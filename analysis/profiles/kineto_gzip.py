"""The text of a gzip'd Kineto trace for torch_trace's stream, inflated by one zlib object.

gzip.open under io.TextIOWrapper passes each piece through a buffered reader, a Python-level
member reader and a separate CRC pass, and the text wrapper joins its pieces again: four copies
of the text and several Python calls per piece. Here a piece of the file is inflated straight to
at most the characters asked for (zlib checks each member's CRC and length itself) and decoded
once. As gzip.open reads them: members one after another, zero padding between or after them;
a stream cut short raises EOFError, a corrupt one zlib.error, text not UTF-8 UnicodeDecodeError.
"""

from __future__ import annotations

import codecs
import os
import zlib

RAW_BYTES = 1 << 17  # compressed bytes read at a time (gzip's own read size)
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate stream
_CUT = "Compressed file ended before the end-of-stream marker was reached"


class GzipText:
    """read(n): the next text of a gzip file, at most n characters ('' at the end)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._raw = open(path, "rb")  # closed by close(), or the with block
        self._unzip = zlib.decompressobj(_GZIP_WBITS)
        self._pending = b""  # compressed input not inflated yet
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._end = False

    def __enter__(self) -> GzipText:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._raw.close()

    def read(self, size: int) -> str:
        while not self._end:
            text = self._text.decode(self._inflate(size))
            if text:
                return text
        return self._text.decode(b"", final=True)  # a character cut at the end raises

    def _inflate(self, size: int) -> bytes:
        """At most `size` inflated bytes, b"" only at the end (then _end is set)."""
        unzip = self._unzip
        while True:
            if unzip.eof:  # a member ended: zero padding, the end, or another member
                rest = unzip.unused_data.lstrip(b"\0")
                while not rest:
                    more = self._raw.read(RAW_BYTES)
                    if not more:
                        self._end = True
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
