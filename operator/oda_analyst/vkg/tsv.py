"""Fast conversion of SELECT results: pyoxigraph writes them as SPARQL TSV in Rust, Polars splits
and converts them a column at a time.

Reading a result term by term through pyoxigraph's Python objects costs about 3 µs a value (a
Q4-sized result of 176k rows x 4 columns: ~2 s), more than the query. Here the engine serialises
the solutions (``QuerySolutions.serialize(format=TSV)``), Polars reads the text as String columns
and each column is converted by one vectorised rule when all its cells share a form — IRIs, plain
strings, bare integers or booleans, or literals of one datatype (doubles, integers, dateTimes in
UTC) — and cell by cell otherwise. The values are exactly those of ``store.term_value``: IRIs as
``str``, ``xsd:integer`` family as ``int``, ``xsd:decimal`` as ``Decimal``, doubles as ``float``,
booleans as ``bool``, dateTimes as aware datetimes in ``datetime.UTC``, dates as ``date``, blank
nodes as ``_:id``, unbound as ``None``, anything else as its lexical form.

TSV (SPARQL 1.1 Query Results CSV and TSV Formats) writes terms as in Turtle: ``<iri>``,
``"lexical"`` (escaped), ``"lexical"@lang``, ``"lexical"^^<datatype>``, ``_:id``, and numbers
and booleans bare (``42``, ``-1.5``, ``1.0E3``, ``true``); an unbound value is an empty cell.
RDF-star triple terms (``<< … >>``) are not handled here: ``NotTabularError`` tells the caller to
use the term-by-term path.
"""

from __future__ import annotations

import re
from datetime import UTC
from decimal import Decimal
from typing import Any

import polars as pl

from oda_analyst.ontology.namespaces import XSD_NS
from oda_analyst.vkg.values import literal_value

_DT_FAST = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$"
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {
    "t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\",
}  # fmt: skip
_BARE_INT = re.compile(r"^[+-]?\d+$")
_SPECIAL = {"INF": "inf", "+INF": "inf", "-INF": "-inf", "NaN": "nan"}
_INT64 = (
    "integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
    "nonPositiveInteger", "negativeInteger", "unsignedInt", "unsignedShort", "unsignedByte",
)  # fmt: skip
_INT_TYPES = frozenset(XSD_NS + n for n in _INT64)
_FLOAT_TYPES = frozenset((XSD_NS + "double", XSD_NS + "float"))


class NotTabularError(Exception):
    """The result holds terms this reader does not convert (RDF-star triple terms)."""


def unescape(text: str) -> str:
    """The value of an escaped Turtle/N-Triples string body."""
    if "\\" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if len(code) > 1:
            return chr(int(code[1:], 16))
        return _SIMPLE_ESCAPES.get(code, code)

    return _ESCAPE.sub(one, text)


def cell_value(cell: str | None) -> Any:
    """One TSV cell as a Python value (the slow, general path)."""

    if cell is None or cell == "":
        return None
    first = cell[0]
    if first == "<":
        if cell.startswith("<<"):
            raise NotTabularError("an RDF-star triple term")
        return cell[1:-1]
    if first == '"':
        end = cell.rindex('"')
        lexical = unescape(cell[1:end])
        rest = cell[end + 1 :]
        if rest.startswith("^^<"):
            return literal_value(lexical, rest[3:-1])
        return lexical  # a plain or language-tagged string
    if first == "_":
        return cell
    if cell in ("true", "false"):
        return cell == "true"
    if _BARE_INT.match(cell):
        return int(cell)
    if "e" in cell or "E" in cell:
        return float(cell)
    return Decimal(cell)


# -- splitting -------------------------------------------------------------------------------


def read_tsv(data: bytes) -> tuple[tuple[str, ...], list[pl.Series]]:
    """Column names and String columns (null for an unbound cell) of a SPARQL TSV document."""
    head, _, body = data.partition(b"\n")
    names = tuple(v.removeprefix("?").removeprefix("$") for v in head.decode().split("\t") if v)
    if not names:
        raise NotTabularError("a result without variables")
    rows = body.count(b"\n")
    if rows == 0:
        return names, [pl.Series(n, [], dtype=pl.String) for n in names]
    if len(names) == 1:
        # A row whose only value is unbound is an empty line, which a CSV reader would skip.
        lines = body.decode().split("\n")[:rows]
        return names, [pl.Series(names[0], lines, dtype=pl.String).replace("", None)]
    frame = pl.read_csv(
        body,
        has_header=False,
        separator="\t",
        quote_char=None,
        infer_schema=False,
        new_columns=list(names),
        schema={n: pl.String for n in names},
    )
    if frame.height != rows:
        raise NotTabularError(f"read {frame.height} of {rows} rows")
    return names, frame.get_columns()


# -- converting one column ---------------------------------------------------------------------


def _all(mask: pl.Series) -> bool:
    return bool(mask.all())


def _strict_cast(lexical: pl.Series, dtype: pl.DataType) -> pl.Series | None:
    """``lexical`` cast to ``dtype``, or None when a value does not cast (the slow path then
    gives the lexical form, as ``literal_value`` does)."""
    cast = lexical.cast(dtype, strict=False)
    return cast if cast.null_count() == lexical.null_count() else None


def _datetimes(lexical: pl.Series) -> pl.Series | None:
    distinct = lexical.unique()
    if distinct.len() * 4 < lexical.len():
        # Readings share instants (Q4: ~3,600 among 176k rows): parse each once, then map.
        present = distinct.drop_nulls()
        parsed = _parse_datetimes(present)
        if parsed is None:
            return None
        return lexical.replace_strict(present, parsed, default=None, return_dtype=parsed.dtype)
    return _parse_datetimes(lexical)


def _parse_datetimes(lexical: pl.Series) -> pl.Series | None:
    if not _all(lexical.str.contains(_DT_FAST)):
        return None
    parsed = lexical.str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S%.fZ", strict=False)
    if parsed.null_count() != lexical.null_count():
        return None
    return parsed.dt.replace_time_zone("UTC")


def _python_datetimes(moments: pl.Series) -> list[Any]:
    """Aware datetimes in ``datetime.UTC`` (Polars hands back ZoneInfo("UTC")). Readings share
    instants: each distinct one is converted once, then looked up."""
    epoch = moments.dt.epoch("us")
    distinct = epoch.unique().drop_nulls()
    naive = distinct.cast(pl.Datetime("us")).to_list()
    table: dict[int | None, Any] = {None: None}
    table.update(zip(distinct.to_list(), (m.replace(tzinfo=UTC) for m in naive), strict=True))
    return [table[e] for e in epoch.to_list()]


def _typed(lexical: pl.Series, datatype: str) -> pl.Series | list[Any]:

    converted: pl.Series | None = None
    if datatype in _FLOAT_TYPES:
        converted = _strict_cast(lexical.replace(_SPECIAL), pl.Float64())
    elif datatype in _INT_TYPES:
        converted = _strict_cast(lexical, pl.Int64())
    elif datatype == XSD_NS + "dateTime":
        converted = _datetimes(lexical)
    elif datatype == XSD_NS + "string":
        converted = lexical
    if converted is not None:
        return converted
    cache: dict[str | None, Any] = {None: None}
    out = []
    for text in lexical.to_list():
        if text not in cache:
            cache[text] = literal_value(text, datatype)
        out.append(cache[text])
    return out


def _lexical(column: pl.Series, suffix_len: int) -> pl.Series:
    """The escaped body of ``"…"<suffix>`` cells, unescaped."""
    body = column.str.slice(1, column.str.len_chars() - 2 - suffix_len)
    if _all(body.str.contains("\\", literal=True).not_()):
        return body
    return pl.Series(column.name, [None if t is None else unescape(t) for t in body.to_list()])


def _convert(column: pl.Series) -> pl.Series | list[Any]:
    """One TSV column converted: a typed Series when one vectorised rule fits every cell, else
    a list of Python values."""
    present = column.drop_nulls()
    if present.len() == 0:
        return [None] * column.len()
    first = str(present[0])
    if first.startswith("<") and not first.startswith("<<"):
        iri = column.str.starts_with("<") & column.str.starts_with("<<").not_()
        if _all(iri):
            return column.str.slice(1, column.str.len_chars() - 2)
    elif first.startswith('"'):
        end = first.rindex('"')
        suffix = first[end + 1 :]
        if suffix == "" and _all(column.str.ends_with('"')):
            return _lexical(column, 0)
        if suffix.startswith("^^<") and _all(column.str.ends_with('"' + suffix)):
            return _typed(_lexical(column, len(suffix)), suffix[3:-1])
    elif _all(column.str.contains(r"^[+-]?\d+$")):
        cast = _strict_cast(column, pl.Int64())
        if cast is not None:
            return cast
    elif _all(column.is_in(["true", "false"])):
        return column == "true"
    return [cell_value(c) for c in column.to_list()]


def column_values(column: pl.Series) -> list[Any]:
    """The Python values of one TSV column."""
    converted = _convert(column)
    if isinstance(converted, list):
        return converted
    if converted.dtype == pl.Datetime:
        return _python_datetimes(converted)
    return converted.to_list()


def tsv_rows(data: bytes) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """(columns, rows) of a SPARQL TSV document with values as ``store.term_value`` gives."""
    names, columns = read_tsv(data)
    values = [column_values(c) for c in columns]
    return names, list(zip(*values, strict=True))


def tsv_frame(data: bytes) -> pl.DataFrame:
    """A SPARQL TSV document as a typed Polars frame: a column of one kind gets its dtype (String
    for IRIs and strings, Int64, Float64, Boolean, Datetime(us, UTC)); other columns hold the
    Python values (Decimal, date, mixed kinds: Object)."""
    names, columns = read_tsv(data)
    series = []
    for name, column in zip(names, columns, strict=True):
        converted = _convert(column)
        if isinstance(converted, pl.Series):
            series.append(converted.alias(name))
            continue
        try:
            series.append(pl.Series(name, converted, strict=True))
        except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
            series.append(pl.Series(name, converted, dtype=pl.Object))
    return pl.DataFrame(series)
