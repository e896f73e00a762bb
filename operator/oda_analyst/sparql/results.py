"""Query results: inline rows up to a row limit, beyond it one CSV file with a download handle.

A result of at most ``row_limit`` rows comes back inline. A larger one is written, streaming, to
``<out_dir>/<stem>.csv`` (all rows, header = columns) and comes back with **no inline rows**: only
a labelled ``preview`` of the first rows, the row count, the file and its handle. Returning the
first ``row_limit`` rows as if they were the result would invite a reader (or a model) to average,
count or plot a silently cut table; a preview that says it is one cannot be mistaken for the
whole, and the whole is in exactly one place.

Handles are opaque: ``<stem>-<24 hex>``, a random token whose SHA-256 is stored beside the file
(``<stem>.csv.meta.json``) with the owner and the expiry. ``open_csv`` accepts only that shape
(no ``/``, no ``..``), compares the token in constant time and resolves the path itself, so a
client can never steer it to another file. Files are written under a temporary name and renamed
once complete, the metadata last: a handle never points at a half-written file.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import json
import math
import os
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from oda_analyst.errors import AccessDeniedError, UsageError

PREVIEW_ROWS = 20
# Distinct values whose CSV text a writer remembers.
_CELL_MEMO = 1 << 16
DEFAULT_CSV_TTL = timedelta(days=1)
_STEM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_HANDLE = re.compile(r"^(?P<stem>[A-Za-z0-9][A-Za-z0-9_.-]{0,127})-(?P<token>[0-9a-f]{24})$")
_META_SUFFIX = ".csv.meta.json"
_HANDLE_HINT = "use the csv_handle of a query result; results expire after a while, run it again"


def check_stem(stem: str) -> str:
    """``stem`` if it can name a result file in ``out_dir`` (no separators, no ``..``)."""
    if not _STEM.match(stem) or ".." in stem:
        raise UsageError(
            f"invalid request id {stem!r} for a result file",
            hint="use 1-128 letters, digits, '_', '.', '-' (no '..'), e.g. a new_request_id()",
        )
    return stem


# -- values --------------------------------------------------------------------------------------


def iso_utc(value: datetime) -> str:
    """ISO-8601 with a ``Z`` (a naive datetime is read as UTC, as the store does)."""
    utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return utc.isoformat().replace("+00:00", "Z")


def json_value(value: Any) -> Any:
    """A JSON-safe value: datetimes ISO-8601 Z, dates ISO, Decimal as float (str when it has no
    finite float), non-finite floats as None (JSON has no NaN), other objects as text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        number = float(value)
        return number if math.isfinite(number) else str(value)
    return str(value)


def csv_cell(value: Any) -> str:
    """A CSV cell: empty for None, ``true``/``false``, ISO-8601 Z times, shortest float text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return iso_utc(value)
    return str(value)  # str(float) is the shortest text that reads back as the same float


# -- the result ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultSet:
    """One executed query's result: ``rows`` inline (≤ row limit) or a CSV file and a preview."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...] | None
    row_count: int
    csv_path: Path | None = None
    csv_handle: str | None = None
    truncated: bool = False  # True when the rows are in the CSV file, not inline
    preview: tuple[tuple[Any, ...], ...] = ()
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        def table(rows: Iterable[Sequence[Any]]) -> list[list[Any]]:
            return [[json_value(v) for v in row] for row in rows]

        return {
            "columns": list(self.columns),
            "rows": None if self.rows is None else table(self.rows),
            "row_count": self.row_count,
            "truncated": self.truncated,
            "csv": None if self.csv_path is None else str(self.csv_path),
            "csv_handle": self.csv_handle,
            "preview": table(self.preview),
            "notes": list(self.notes),
        }


class ResultWriter:
    """Collects rows; keeps them in memory up to ``row_limit``, then streams every row to CSV.

    Use as a context manager: leaving it with an exception removes the partial file. The exact
    boundary: ``row_limit`` rows are inline, ``row_limit + 1`` go to the file.
    """

    def __init__(
        self,
        columns: Sequence[str],
        *,
        row_limit: int,
        out_dir: Path,
        stem: str,
        user: str | None = None,
        ttl: timedelta = DEFAULT_CSV_TTL,
    ) -> None:
        if row_limit < 1:
            raise UsageError(f"row limit must be at least 1, got {row_limit}", hint="ODA_ROW_LIMIT")
        self.columns = tuple(columns)
        self.row_limit = row_limit
        self.out_dir = out_dir
        self.stem = check_stem(stem)
        self.user = user
        self.ttl = ttl
        self._buffer: list[tuple[Any, ...]] = []
        self._cells: dict[tuple[type, Any], str] = {}
        self._count = 0
        self._tmp: Path | None = None
        self._file: IO[str] | None = None
        self._csv: Any = None

    def add(self, row: Sequence[Any]) -> None:
        self._count += 1
        if self._file is None and self._count <= self.row_limit:
            self._buffer.append(tuple(row))
            return
        if self._file is None:
            self._spill()
        self._csv.writerow(self._row_cells(row))
        if len(self._buffer) < PREVIEW_ROWS:
            self._buffer.append(tuple(row))

    def extend(self, rows: Iterable[Sequence[Any]]) -> None:
        pending = iter(rows)
        for row in pending:
            self.add(row)
            if self._file is not None:
                break
        if self._file is None:
            return

        def spilled() -> Iterable[list[str]]:
            # Past the row limit every row goes to the file: one writerows call, no per-row add.
            for row in pending:
                self._count += 1
                if len(self._buffer) < PREVIEW_ROWS:
                    self._buffer.append(tuple(row))
                yield self._row_cells(row)

        self._csv.writerows(spilled())

    def _row_cells(self, row: Sequence[Any]) -> list[str]:
        # Large results repeat their values (the same node, metric and instants on many rows):
        # each distinct value is formatted once. The type is part of the key (1 == 1.0 == True).
        cells = self._cells
        out = []
        for value in row:
            key = (type(value), value)
            try:
                text = cells[key]
            except KeyError:
                text = csv_cell(value)
                if len(cells) < _CELL_MEMO:
                    cells[key] = text
            except TypeError:  # an unhashable value
                text = csv_cell(value)
            out.append(text)
        return out

    def _spill(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._tmp = self.out_dir / f".{self.stem}.csv.{secrets.token_hex(4)}.tmp"
        self._file = self._tmp.open("w", encoding="utf-8", newline="")
        self._csv = csv.writer(self._file)
        self._csv.writerow(self.columns)
        self._csv.writerows(self._row_cells(row) for row in self._buffer)
        del self._buffer[PREVIEW_ROWS:]  # the rest lives in the file now

    def finish(self, notes: Sequence[str] = (), *, now: datetime | None = None) -> ResultSet:
        if self._file is None or self._tmp is None:
            return ResultSet(self.columns, tuple(self._buffer), self._count, notes=tuple(notes))
        self._file.close()
        self._file = None
        final = self.out_dir / f"{self.stem}.csv"
        # a rerun of the same request replaces the file: retire the old handle first
        (self.out_dir / f"{self.stem}{_META_SUFFIX}").unlink(missing_ok=True)
        os.replace(self._tmp, final)
        self._tmp = None
        token = secrets.token_hex(12)
        created = now or datetime.now(UTC)
        meta = {
            "token_sha256": _digest(token),
            "user": self.user,
            "created": iso_utc(created),
            "expires": iso_utc(created + self.ttl),
            "rows": self._count,
            "columns": list(self.columns),
        }
        _write_atomic(self.out_dir / f"{self.stem}{_META_SUFFIX}", json.dumps(meta))
        return ResultSet(
            self.columns,
            None,
            self._count,
            csv_path=final,
            csv_handle=f"{self.stem}-{token}",
            truncated=True,
            preview=tuple(self._buffer[: min(PREVIEW_ROWS, self.row_limit)]),
            notes=tuple(notes),
        )

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.abort()  # after finish() there is nothing left to remove


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# -- download by handle --------------------------------------------------------------------------


def _read_meta(path: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _expired(meta: dict[str, Any], now: datetime) -> bool:
    try:
        return datetime.fromisoformat(str(meta["expires"]).replace("Z", "+00:00")) <= now
    except (KeyError, ValueError):
        return True  # unreadable expiry: treat as gone


def open_csv(handle: str, *, out_dir: Path, user: str | None, now: datetime | None = None) -> Path:
    """The CSV file of a result handle, for download.

    UsageError for a malformed, unknown or expired handle; AccessDeniedError when the result has
    an owner and ``user`` is someone else (None only reads results that have no owner).
    """
    found = _HANDLE.match(handle) if isinstance(handle, str) else None
    if found is None or ".." in handle:
        raise UsageError("not a download handle", hint=_HANDLE_HINT)
    stem, token = found.group("stem"), found.group("token")
    meta = _read_meta(out_dir / f"{stem}{_META_SUFFIX}")
    path = out_dir / f"{stem}.csv"
    valid = meta is not None and hmac.compare_digest(
        str(meta.get("token_sha256", "")), _digest(token)
    )
    if meta is None or not valid or not path.is_file():
        raise UsageError(f"unknown download handle {handle}", hint=_HANDLE_HINT)
    if _expired(meta, now or datetime.now(UTC)):
        raise UsageError(f"download handle {handle} has expired", hint=_HANDLE_HINT)
    owner = meta.get("user")
    if owner is not None and owner != user:
        raise AccessDeniedError(
            f"result {stem} belongs to another user", hint="ask its owner to share the file"
        )
    resolved = path.resolve()
    if resolved.parent != out_dir.resolve():  # a symlink planted in out_dir
        raise UsageError(f"unknown download handle {handle}", hint=_HANDLE_HINT)
    return resolved


def sweep_expired(out_dir: Path, *, now: datetime | None = None) -> list[str]:
    """Remove expired result files and their metadata; return their stems."""
    moment = now or datetime.now(UTC)
    removed = []
    for meta_path in sorted(out_dir.glob(f"*{_META_SUFFIX}")):
        meta = _read_meta(meta_path)
        if meta is not None and not _expired(meta, moment):
            continue
        stem = meta_path.name.removesuffix(_META_SUFFIX)
        meta_path.unlink(missing_ok=True)
        (out_dir / f"{stem}.csv").unlink(missing_ok=True)
        removed.append(stem)
    return removed


__all__ = [
    "DEFAULT_CSV_TTL",
    "PREVIEW_ROWS",
    "ResultSet",
    "ResultWriter",
    "check_stem",
    "csv_cell",
    "iso_utc",
    "json_value",
    "open_csv",
    "sweep_expired",
]
