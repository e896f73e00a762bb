"""Streaming Parquet writer: one file per (month, plugin, metric), one row group per chunk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from oda_analyst.lake.schema import DICT_STRING

I64 = NDArray[np.int64]
ROW_GROUP = 131_072


@dataclass(frozen=True)
class Coded:
    """A dictionary column given as codes into a dictionary (no per-row strings built)."""

    codes: I64
    dictionary: list[str]


TagValues = Coded | list[str]
ValueData = NDArray[np.float64] | NDArray[np.int64] | str | list[str]


def dict_array(data: TagValues, n: int) -> pa.Array[Any]:
    if isinstance(data, Coded):
        return pa.DictionaryArray.from_arrays(
            pa.array(data.codes.astype(np.int16), pa.int16()),
            pa.array(data.dictionary, pa.string()),
        )
    encoded = pa.array(data, pa.string()).dictionary_encode()
    return pa.DictionaryArray.from_arrays(encoded.indices.cast(pa.int16()), encoded.dictionary)


def column(data: TagValues | ValueData, arrow_type: pa.DataType, n: int) -> pa.Array[Any]:
    """An Arrow column of the schema's type from numpy values, codes or strings."""
    if arrow_type == DICT_STRING:
        if isinstance(data, str):
            return dict_array(Coded(np.zeros(n, np.int64), [data]), n)
        return dict_array(data, n)  # type: ignore[arg-type]
    if pa.types.is_string(arrow_type):
        if isinstance(data, Coded):
            return dict_array(data, n).cast(pa.string())
        if isinstance(data, str):
            return pa.array([data] * n, pa.string())
        return pa.array(data, pa.string())
    if pa.types.is_timestamp(arrow_type):
        return pa.array(np.asarray(data, dtype=np.int64), pa.int64()).cast(arrow_type)
    values = np.asarray(data)
    if pa.types.is_integer(arrow_type):
        values = np.rint(values) if values.dtype.kind == "f" else values
        return pa.array(values.astype(arrow_type.to_pandas_dtype()), arrow_type)
    return pa.array(values.astype(arrow_type.to_pandas_dtype()), arrow_type)


class PartitionWriter:
    """Writes row groups of one partition file as they come; the file exists once closed."""

    def __init__(self, root: Path, relpath: str, schema: pa.Schema) -> None:
        self.path = root / relpath
        self.schema = schema
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None

    def _open(self) -> pq.ParquetWriter:
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        return self._writer

    def write_columns(self, cols: dict[str, TagValues | ValueData], n: int) -> None:
        """Write one chunk given per-column data keyed by schema field name."""
        if n == 0:
            return
        arrays = [column(cols[f.name], f.type, n) for f in self.schema]
        self.write_table(pa.Table.from_arrays(arrays, schema=self.schema))

    def write_table(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self._open().write_table(table, row_group_size=ROW_GROUP)
        self.rows += table.num_rows

    def close(self) -> int:
        """Close (writing an empty file with the schema if no row came) and return its bytes."""
        writer = self._open()
        writer.close()
        return self.path.stat().st_size
