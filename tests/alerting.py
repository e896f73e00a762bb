"""Debian's Prometheus and Alertmanager on loopback for the alert tests (scripts/setup.sh
installs both), and a tiny HTTP sink that records what is POSTed to it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from k8s_node import wait_for
from processes import stop_process

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (scripts/setup.sh installs Debian's {name})")
    return found


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@contextmanager
def _serve(argv: list[str], log: Path, ready_url: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"{argv[0]} exited: {log.read_text()[-2000:]}")
            return _up(ready_url)

        wait_for(ready, timeout=60, what=f"{argv[0]} at {ready_url}", every=0.3)
        yield proc
    finally:
        stop_process(proc)


@contextmanager
def alertmanager(root: Path, webhook_url: str) -> Iterator[str]:
    """Alertmanager sending every alert to ``webhook_url`` at once (1 s group wait)."""
    port = free_port()
    config = {
        "route": {"receiver": "oda", "group_by": ["alertname", "node"], "group_wait": "1s",
                  "group_interval": "2s", "repeat_interval": "1h"},
        "receivers": [{"name": "oda", "webhook_configs": [{"url": webhook_url,
                                                           "send_resolved": False}]}],
    }  # fmt: skip
    (root / "alertmanager.yml").write_text(yaml.safe_dump(config))
    url = f"http://{LOOPBACK}:{port}"
    argv = [
        _binary("prometheus-alertmanager"),
        f"--config.file={root / 'alertmanager.yml'}",
        f"--storage.path={root / 'am-data'}",
        f"--web.listen-address={LOOPBACK}:{port}",
        "--cluster.listen-address=",
    ]  # fmt: skip  (no HA gossip on a test box)
    with _serve(argv, root / "alertmanager.log", f"{url}/-/ready"):
        yield url


@contextmanager
def prometheus(root: Path, alertmanager_url: str, rules: list[dict[str, Any]]) -> Iterator[str]:
    """Prometheus evaluating ``rules`` every second and sending to Alertmanager. The resend
    delay must be short: with the default (1 m) the first notification of a new alert waits."""
    port = free_port()
    (root / "rules.yml").write_text(yaml.safe_dump(
        {"groups": [{"name": "oda-test", "interval": "1s", "rules": rules}]}))  # fmt: skip
    config = {
        "global": {"evaluation_interval": "1s", "scrape_interval": "5s"},
        "rule_files": [str(root / "rules.yml")],
        "alerting": {"alertmanagers": [{"static_configs": [
            {"targets": [alertmanager_url.removeprefix("http://")]}]}]},
    }  # fmt: skip
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    url = f"http://{LOOPBACK}:{port}"
    argv = [_binary("prometheus"), f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'prom-data'}", f"--web.listen-address={LOOPBACK}:{port}",
            "--rules.alert.resend-delay=2s"]  # fmt: skip
    with _serve(argv, root / "prometheus.log", f"{url}/-/ready"):
        yield url


class Sink:
    """Records the JSON bodies POSTed to it (the answer webhook's far end)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                sink.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}/answers"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Sink:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
