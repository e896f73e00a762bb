"""Feeding N-Triples to pyoxigraph: a file over byte chunks (for RocksDB's ``bulk_load``), the
trusted marker for our own serialiser's output, and segment-wise ``Store.load`` into in-memory
stores (the fastest in-memory path: each call releases the GIL, so a producer thread serialises
the next segment while one loads).

One segment at a time, in the caller's thread: pyoxigraph's in-memory store admits a single
writer (every ``load`` and transaction holds one mutex for its whole parse and insert), so two
loader threads only took turns, and on a shared 2-core machine the extra threads cost time."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pyoxigraph as ox


class ChunkReader(io.RawIOBase):
    """A binary file over an iterable of byte chunks, so a stream of N-Triples can be loaded
    without joining it in memory."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        super().__init__()
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = memoryview(b"")
        self.total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(chunk).cast("B")
        size = min(len(view), len(self._pending))
        view[:size] = self._pending[:size]
        # A view of the rest, not a copy: a chunk is read in many small pieces.
        self._pending = self._pending[size:]
        self.total += size
        return size


class TrustedNTriples:
    """N-Triples chunks written by our own serialiser (the VKG builder), marked so that embedded
    stores parse them leniently (IRIs and literals are not re-validated: ~15-30% faster loads).
    Anything else is parsed strictly. It is an ordinary ``Iterable[bytes]``, so every GraphStore
    (also one over HTTP) accepts it."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._chunks)


def is_trusted(data: bytes | Iterable[bytes]) -> bool:
    return isinstance(data, TrustedNTriples)


# Bytes per Store.load call when a stream is loaded into an in-memory store: each segment is
# loaded (GIL released) while the producer serialises the next one.
SEGMENT_BYTES = 1 << 21
_LINE = re.compile(r"line (\d+)")


def _shifted(exc: SyntaxError, lines_before: int) -> SyntaxError:
    """A parse error of one segment with its line number counted from the document's start."""
    message = str(exc.args[0]) if exc.args else str(exc)
    if lines_before:
        message = _LINE.sub(lambda m: f"line {int(m.group(1)) + lines_before}", message, count=1)
    return SyntaxError(message)


def load_segments(
    db: ox.Store,
    data: bytes | Iterable[bytes],
    *,
    to_graph: ox.NamedNode | None,
    lenient: bool,
    segment: int = SEGMENT_BYTES,
) -> None:
    """Load N-Triples into an in-memory store with ``Store.load``, whole lines and about
    ``segment`` bytes per call, in document order. Each call is atomic, not the whole load: the
    caller removes what was loaded if it must. A SyntaxError names the line in the whole
    document."""
    options: dict[str, Any] = {"lenient": lenient}
    if to_graph is not None:
        options["to_graph"] = to_graph

    def load(part: bytes, lines_before: int) -> None:
        try:
            db.load(part, ox.RdfFormat.N_TRIPLES, **options)
        except SyntaxError as exc:
            raise _shifted(exc, lines_before) from None

    if isinstance(data, bytes):
        load(data, 0)
        return
    for part, lines_before in _segments(data, segment):
        load(part, lines_before)


def _segments(chunks: Iterable[bytes], segment: int) -> Iterator[tuple[bytes, int]]:
    """(whole lines of about ``segment`` bytes, lines before them) from chunks split anywhere."""
    pending: list[bytes] = []
    size = 0
    lines_before = 0
    for chunk in chunks:
        pending.append(chunk)
        size += len(chunk)
        if size < segment:
            continue
        joined = b"".join(pending)
        cut = joined.rfind(b"\n") + 1
        if cut == 0:
            pending, size = [joined], len(joined)
            continue
        part = joined[:cut] if cut < len(joined) else joined
        yield part, lines_before
        lines_before += part.count(b"\n")
        rest = joined[cut:]
        pending, size = ([rest], len(rest)) if rest else ([], 0)
    if pending:
        yield b"".join(pending), lines_before
