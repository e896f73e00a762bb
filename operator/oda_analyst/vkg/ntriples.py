"""N-Triples text from Polars columns, without a Python loop per row.

A triple column is one String expression per row (``<s> <p> o .``); a frame of such columns is
written with ``write_csv(separator="\\n", quote_style="never")`` so that every cell becomes a line
of the document. A null cell (a missing optional value, e.g. a job without an end time) becomes an
empty line, which N-Triples allows, so optional triples need no filtering pass.

Literals follow the lexical forms pyoxigraph and rdflib accept: ``xsd:dateTime`` in UTC with
milliseconds and ``Z``, ``xsd:double`` as Polars prints floats and integers, ``xsd:integer`` as
decimal digits, ``xsd:string`` escaped per the N-Triples grammar (backslash, quote, CR, LF).
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

import polars as pl

from oda_analyst.ontology.namespaces import ONTOLOGY_NS, RDF_NS, RDFS_NS, XSD_NS

XSD_DATETIME = f"<{XSD_NS}dateTime>"
XSD_DOUBLE = f"<{XSD_NS}double>"
XSD_INTEGER = f"<{XSD_NS}integer>"
RDF_TYPE = f"<{RDF_NS}type>"
RDFS_LABEL = f"<{RDFS_NS}label>"
DATETIME_FORMAT = "%Y-%m-%dT%H:%M:%S%.3fZ"

_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"))


def oda(local_name: str) -> str:
    """``<…ontology#local_name>`` as written in N-Triples."""
    return f"<{ONTOLOGY_NS}{local_name}>"


# -- Python terms (static triples: a few thousand lines) -------------------------------------


def iri(value: str) -> str:
    """An IRI term. Instance IRIs come from oda_analyst.ontology.namespaces (already encoded)."""
    return f"<{value}>"


def escape(text: str) -> str:
    """Escape a string for the inside of an N-Triples literal."""
    for raw, escaped in _ESCAPES:
        text = text.replace(raw, escaped)
    return text


def string_lit(text: str) -> str:
    """A plain (xsd:string) literal."""
    return f'"{escape(text)}"'


def int_lit(value: int) -> str:
    return f'"{int(value)}"^^{XSD_INTEGER}'


def double_lit(value: float) -> str:
    return f'"{float(value)!r}"^^{XSD_DOUBLE}'


def datetime_lit(moment: datetime) -> str:
    """An xsd:dateTime literal in UTC with milliseconds (``2022-06-01T20:00:07.000Z``)."""
    utc = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return f'"{utc.strftime("%Y-%m-%dT%H:%M:%S")}.{utc.microsecond // 1000:03d}Z"^^{XSD_DATETIME}'


def triple(s: str, p: str, o: str) -> str:
    """One N-Triples line (without the newline) from already formatted terms."""
    return f"{s} {p} {o} ."


# -- Polars expressions (readings and jobs: up to millions of rows) ---------------------------


def e_iri(prefix: str, key: pl.Expr) -> pl.Expr:
    """``<prefix + key>`` per row; ``key`` must already be IRI-safe (digits, encoded names)."""
    return pl.concat_str([pl.lit(f"<{prefix}"), key.cast(pl.String), pl.lit(">")])


def e_string_lit(expr: pl.Expr) -> pl.Expr:
    """An escaped xsd:string literal per row (null stays null)."""
    text = expr.cast(pl.String)
    for raw, escaped in _ESCAPES:
        text = text.str.replace_all(raw, escaped, literal=True)
    return pl.concat_str([pl.lit('"'), text, pl.lit('"')])


def e_int_lit(expr: pl.Expr) -> pl.Expr:
    return pl.concat_str(
        [pl.lit('"'), expr.cast(pl.Int64).cast(pl.String), pl.lit(f'"^^{XSD_INTEGER}')]
    )


def e_double_lit(expr: pl.Expr) -> pl.Expr:
    """xsd:double per row. Polars prints ints as digits and floats as ``23.5``/``1e-5``; NaN and
    infinities become ``NaN``/``INF``/``-INF`` as XSD spells them."""
    text = expr.cast(pl.String)
    text = (
        pl.when(expr.cast(pl.Float64).is_nan())
        .then(pl.lit("NaN"))
        .otherwise(text.str.replace("^inf$", "INF").str.replace("^-inf$", "-INF"))
    )
    return pl.concat_str([pl.lit('"'), text, pl.lit(f'"^^{XSD_DOUBLE}')])


def e_fast_double_lit(expr: pl.Expr, *, floating: bool) -> pl.Expr:
    """xsd:double per row, skipping the NaN/infinity handling for integer columns (and for
    float columns known to hold neither: ``has_special_floats``)."""
    if floating:
        return e_double_lit(expr)
    return pl.concat_str([pl.lit('"'), expr.cast(pl.String), pl.lit(f'"^^{XSD_DOUBLE}')])


def has_special_floats(values: pl.Series) -> bool:
    """Whether a column holds NaN or an infinity (which xsd:double spells its own way)."""
    if not values.dtype.is_float():
        return False
    return bool((values.is_nan() | values.is_infinite()).any())


def e_datetime_lit(expr: pl.Expr) -> pl.Expr:
    """xsd:dateTime per row from a Datetime column in UTC (as the lake reader returns it)."""
    return pl.concat_str(
        [pl.lit('"'), expr.dt.strftime(DATETIME_FORMAT), pl.lit(f'"^^{XSD_DATETIME}')]
    )


def e_datetime_lit_ms(epoch_ms: pl.Expr) -> pl.Expr:
    """xsd:dateTime per row from epoch milliseconds (Int64)."""
    moment = pl.from_epoch(epoch_ms, time_unit="ms")
    return pl.concat_str(
        [pl.lit('"'), moment.dt.strftime(DATETIME_FORMAT), pl.lit(f'"^^{XSD_DATETIME}')]
    )


def datetime_lits_ms(epoch_ms: pl.Series) -> pl.Series:
    """``e_datetime_lit_ms`` of a column, formatting each distinct instant once.

    Readings of many sensors share instants (Q4: ~180 per chunk of 5,000 rows), and ``strftime``
    costs several times more than a hash lookup per row; a column of mostly distinct instants
    is formatted row by row as before.
    """
    distinct = epoch_ms.unique()
    frame = pl.DataFrame({"ms": distinct if distinct.len() * 4 < epoch_ms.len() else epoch_ms})
    literals = frame.select(e_datetime_lit_ms(pl.col("ms"))).to_series()
    if frame.height == epoch_ms.len():
        return literals.alias(epoch_ms.name)
    return epoch_ms.replace_strict(distinct, literals, return_dtype=pl.String)


def e_triple(s: pl.Expr, p: str, o: pl.Expr) -> pl.Expr:
    """One line per row; null when the subject or object is null (an optional triple)."""
    return pl.concat_str([s, pl.lit(f" {p} "), o, pl.lit(" .")])


# -- documents ------------------------------------------------------------------------------


def frame_to_ntriples(frame: pl.DataFrame) -> bytes:
    """Every cell of a frame of triple columns as one line (nulls as empty lines)."""
    if frame.height == 0 or frame.width == 0:
        return b""
    buffer = io.BytesIO()
    frame.write_csv(
        buffer, include_header=False, separator="\n", quote_style="never", null_value=""
    )
    return buffer.getvalue()


def count_triples(frame: pl.DataFrame) -> int:
    """Non-null cells of a frame of triple columns: the triples it serialises to."""
    nulls: int = sum(int(n) for n in frame.null_count().row(0))
    return frame.height * frame.width - nulls


def lines_to_ntriples(lines: list[str]) -> bytes:
    """A document from Python-built lines."""
    return ("\n".join(lines) + "\n").encode() if lines else b""
