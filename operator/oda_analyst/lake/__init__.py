"""The Parquet lake in the M100 ExaData layout: schema, topology, reader and synthetic generator."""

from oda_analyst.lake.reader import Lake

__all__ = ["Lake"]
