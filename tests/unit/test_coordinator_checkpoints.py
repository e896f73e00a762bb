"""Many requests open the coordinator's checkpoint file at once, on a new file too."""

from __future__ import annotations

import asyncio
from pathlib import Path

from oda_analyst.coordinator.checkpoints import open_saver


async def _open_and_set_up(path: Path) -> None:
    async with open_saver(path) as saver:
        await saver.setup()


def test_concurrent_requests_set_up_one_new_checkpoint_file(tmp_path: Path) -> None:
    # LangGraph's own from_conn_string failed here with "database is locked" about one
    # round in four (six connections racing to switch a new file to WAL)
    async def rounds() -> list[BaseException]:
        errors: list[BaseException] = []
        for i in range(20):
            path = tmp_path / f"r{i}" / "checkpoints.sqlite"
            got = await asyncio.gather(*(_open_and_set_up(path) for _ in range(6)),
                                       return_exceptions=True)  # fmt: skip
            errors += [e for e in got if isinstance(e, BaseException)]
        return errors

    assert asyncio.run(rounds()) == []


def test_the_prepared_file_keeps_its_checkpoints_across_connections(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"

    async def tables() -> list[str]:
        async with open_saver(path) as saver:
            await saver.setup()
            cursor = await saver.conn.execute("PRAGMA journal_mode")
            mode = await cursor.fetchone()
            cursor = await saver.conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
            )
            return [str(mode[0]) if mode else ""] + [str(r[0]) for r in await cursor.fetchall()]

    assert asyncio.run(tables()) == ["wal", "checkpoints", "writes"]
