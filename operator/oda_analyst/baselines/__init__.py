"""The paper's two comparison backends (section IV), for the benchmark and ``ask --backend``.

- ``sota1``: the EXASAGE Query Tool — regex extraction over a fixed set of categories, ten query
  archetypes, one shot over the same per-query VKG and SPARQL layers as ours; exact metric names
  and strict ``[YYYY-MM-DD HH:MM:SS]`` timestamps, no clarification, no recovery.
- ``sota2``: the Datalake Query Tool — no ontology and no graph: it lists the lake's plugins and
  metrics, describes their columns and runs targeted filtered queries on the raw Parquet files,
  returning inline JSON (no CSV, no clarification).

Both sit behind MCP servers with the retriever's tool names (``query``, ``clarify``,
``download_csv``, ``status``) and answer in the retriever's answer shape (``payload``). They must
not borrow our understanding (entities, time parsing, grounding, planning): import-linter keeps
the retriever out of this package.
"""
