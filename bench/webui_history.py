"""How fast each web UI history store answers what a page needs (figures, not a test).

For each store: write ``--users`` × ``--conversations`` conversations of ``--messages`` messages
(answers of about ``--payload-kb`` KB, like a stored answer with its rows), then time what the
UI does per page view: list a user's conversations, load one conversation's messages, look one
message up (an artefact or feedback), and record feedback.

    python bench/webui_history.py                                   # SQLite only
    python bench/webui_history.py --redis redis://127.0.0.1:6379/0 \\
        --postgres postgresql://oda@127.0.0.1:5432/postgres

Last line, for scripts:
    webui_history: <store>=<median ms to load a conversation> ...
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from oda_analyst.webui.history import History
from oda_analyst.webui.history_postgres import PostgresHistory
from oda_analyst.webui.history_redis import RedisHistory
from oda_analyst.webui.store import HistoryStore


def _ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def run(name: str, store: HistoryStore, args: argparse.Namespace) -> float:
    tag = uuid.uuid4().hex[:6]
    users = [f"u{tag}{i}" for i in range(args.users)]
    rows = [[i, "2022-06-01T08:00:00Z", 71.5] for i in range(args.payload_kb * 30)]
    began = time.perf_counter()
    last: dict[str, tuple[str, str]] = {}
    for user in users:
        for c in range(args.conversations):
            conv = store.create_conversation(user, f"question {c}")
            for m in range(args.messages):
                role = "user" if m % 2 == 0 else "assistant"
                payload = {"text": "q"} if role == "user" else {"summary": "a", "rows": rows}
                msg = store.add_message(conv.id, role, payload)
            last[user] = (conv.id, msg.id)
    written = args.users * args.conversations * args.messages
    write_ms = (time.perf_counter() - began) * 1000 / written
    user = users[0]
    cid, mid = last[user]
    listing = _ms(lambda: store.conversations(user), args.repeat)
    loading = _ms(lambda: store.messages(user, cid), args.repeat)
    lookup = _ms(lambda: store.message(user, mid), args.repeat)
    rating = _ms(lambda: store.set_feedback(user, mid, "r", 1, "ok"), args.repeat)
    print(
        f"{name:8s} write/message {write_ms:6.2f} ms  list {listing:6.2f} ms  "
        f"load conversation ({args.messages} msgs) {loading:6.2f} ms  "
        f"message {lookup:6.2f} ms  feedback {rating:6.2f} ms"
    )
    store.close()
    return loading


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=5)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--payload-kb", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--redis", help="a Redis URL to bench too")
    parser.add_argument("--postgres", help="a Postgres URL to bench too")
    args = parser.parse_args()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        figures["sqlite"] = run("sqlite", History(Path(tmp) / "h.sqlite"), args)
    if args.redis:
        figures["redis"] = run("redis", RedisHistory(args.redis, prefix="bench:ui"), args)
    if args.postgres:
        figures["postgres"] = run("postgres", PostgresHistory(args.postgres), args)
    print("webui_history: " + " ".join(f"{k}={v:.2f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
