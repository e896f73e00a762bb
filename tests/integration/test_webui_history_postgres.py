"""The web UI's history in a real Postgres: a throwaway server (Debian's ``postgresql``;
initdb + pg_ctl on loopback, as the ``postgres`` user when the tests run as root, since the
server refuses to run as root), the same store contract as SQLite and Redis, and a restart of
the server between writing and reading."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from oda_analyst.errors import StoreError
from oda_analyst.webui.history_postgres import PostgresHistory
from oidc_provider import free_port
from unit.test_webui_history_contract import HistoryContract, StoreFactory

pytestmark = pytest.mark.integration


class PostgresServer:
    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            pytest.skip("postgresql is not installed (scripts/setup.sh installs it)")
        self.bin = Path(found[-1]).parent
        self.as_user: list[str] = []
        # /tmp itself, not pytest's tmp_path: that is private to the user running the tests.
        self.home = Path(tempfile.mkdtemp(prefix="oda-ui-pg-"))
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.home, "postgres", "postgres")
        self.data = self.home / "data"
        self.port = free_port()
        self.url = f"postgresql://oda@127.0.0.1:{self.port}/postgres"
        self._run("initdb", "-D", str(self.data), "-U", "oda", "--auth=trust", "-E", "UTF8")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self.as_user, str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            log = self.home / "server.log"
            tail = log.read_text()[-2000:] if log.is_file() else ""
            pytest.fail(f"{tool} failed ({done.returncode}):\n{done.stderr[-2000:]}\n{tail}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.home} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.home / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")  # fmt: skip

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()
        server.remove()


class TestPostgresHistory(HistoryContract):
    @pytest.fixture()
    def make_store(self, postgres: PostgresServer) -> Iterator[StoreFactory]:
        opened: list[PostgresHistory] = []

        def make() -> PostgresHistory:
            opened.append(PostgresHistory(postgres.url))
            return opened[-1]

        yield make
        for store in opened:
            store.close()


def test_history_survives_a_server_restart(postgres: PostgresServer) -> None:
    store = PostgresHistory(postgres.url)
    conv = store.create_conversation("gina", "before the restart")
    first = store.add_message(conv.id, "user", {"text": "q"})
    second = store.add_message(conv.id, "assistant", {"summary": "a", "when": "2022-06-01"})
    store.set_feedback("gina", second.id, "r-3", -1, "wrong rack")
    store.close()
    postgres.stop()
    postgres.start()
    again = PostgresHistory(postgres.url)
    try:
        assert [c.title for c in again.conversations("gina")] == ["before the restart"]
        assert [m.id for m in again.messages("gina", conv.id)] == [first.id, second.id]
        assert again.feedback(second.id) == (-1, "wrong rack", "r-3")
        assert again.messages("hank", conv.id) == []
    finally:
        again.close()


def test_an_unreachable_postgres_is_a_store_error_with_a_hint() -> None:
    with pytest.raises(StoreError) as err:
        PostgresHistory(f"postgresql://oda:secret@127.0.0.1:{free_port()}/postgres", timeout_s=2)
    assert err.value.hint and "ODA_UI_HISTORY" in err.value.hint
    assert "secret" not in str(err.value)
