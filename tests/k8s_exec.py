"""The test node's kubelet endpoint for ``pods/exec``: what the API server proxies an exec to.

A client (``kubectl exec``, the analyst's ``Kube.exec``) opens a websocket to the API server's
``/api/v1/namespaces/NS/pods/POD/exec?command=…``; the API server (1.20) checks the caller's
RBAC, looks up the pod's node, and dials ``https://<node InternalIP>:<daemonEndpoints
.kubeletEndpoint.Port>/exec/NS/POD/CONTAINER?command=…&input=1&output=1&error=1`` with the
client's upgrade request, then splices the two connections. This server answers that request:
it speaks ``v4.channel.k8s.io`` (one byte of channel before each binary message: 0 stdin,
1 stdout, 2 stderr, 3 the final Status) and runs the command as the node runs the container
(``NodeAgent.exec_argv``: the same volumes, environment, image and network), ending with the
command's exit code in a Status, as a kubelet does. The API server verifies no kubelet
certificate here (it is started without --kubelet-certificate-authority), so the certificate is
a throwaway self-signed one.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

PROTOCOLS = ["v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"]
STDIN, STDOUT, STDERR, ERROR = 0, 1, 2, 3

# (namespace, pod, container, command) -> argv to run, or a reason it cannot run
Resolve = Callable[[str, str, str, list[str]], "list[str] | str"]


def _status(code: int | None, message: str = "") -> bytes:
    if code == 0:
        body: dict[str, Any] = {"metadata": {}, "status": "Success"}
    elif code is None:
        body = {"metadata": {}, "status": "Failure", "message": message,
                "reason": "InternalError"}  # fmt: skip
    else:
        body = {"metadata": {}, "status": "Failure",
                "message": f"command terminated with non-zero exit code: exit status {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}  # fmt: skip
    return bytes([ERROR]) + json.dumps(body).encode()


def self_signed(folder: Path) -> ssl.SSLContext:
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "kubelet.crt", folder / "kubelet.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)  # fmt: skip
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


class KubeletExec:
    """An HTTPS websocket server on loopback in a thread of its own (``port`` once started)."""

    def __init__(self, resolve: Resolve, workdir: Path) -> None:
        self.resolve = resolve
        self.ssl = self_signed(workdir / "kubelet-tls")
        self.port = 0
        self.calls: list[dict[str, Any]] = []  # what was exec'd: namespace, pod, container, …
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="kubelet-exec", daemon=True)

    def start(self) -> KubeletExec:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the test kubelet's exec server did not start")
        return self

    def stop(self) -> None:
        if self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        async with serve(self._handle, "127.0.0.1", 0, ssl=self.ssl, subprotocols=PROTOCOLS,
                         max_size=2**22, compression=None) as server:  # fmt: skip
            self.port = next(iter(server.sockets)).getsockname()[1]
            self._ready.set()
            await self._stopped.wait()

    async def _handle(self, ws: ServerConnection) -> None:
        parts = urlsplit(ws.request.path if ws.request else "")
        query = parse_qs(parts.query)
        segments = parts.path.strip("/").split("/")
        if len(segments) != 4 or segments[0] != "exec":
            await ws.send(_status(None, f"not an exec: {parts.path}"))
            return
        _, namespace, pod, container = segments
        command = query.get("command", [])
        stdin = "1" in query.get("input", []) or "true" in query.get("stdin", [])
        call = {"namespace": namespace, "pod": pod, "container": container,
                "command": command, "stdin": stdin}  # fmt: skip
        self.calls.append(call)
        argv = self.resolve(namespace, pod, container, command)
        if isinstance(argv, str):
            await ws.send(_status(None, argv))
            return
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)  # fmt: skip

        async def pump(stream: asyncio.StreamReader | None, channel: int) -> None:
            assert stream is not None
            while chunk := await stream.read(1 << 16):
                await ws.send(bytes([channel]) + chunk)

        async def feed() -> None:
            assert proc.stdin is not None
            try:
                async for message in ws:
                    data = message if isinstance(message, bytes) else message.encode()
                    if data[:1] == bytes([STDIN]) and proc.returncode is None:
                        proc.stdin.write(data[1:])
                        await proc.stdin.drain()
            except (ConnectionClosed, ConnectionError):
                pass

        feeding = asyncio.create_task(feed()) if stdin else None
        try:
            await asyncio.gather(pump(proc.stdout, STDOUT), pump(proc.stderr, STDERR))
            code = await proc.wait()
            call["exit"] = code
            await ws.send(_status(code))
        except ConnectionClosed:
            if proc.returncode is None:
                proc.kill()
        finally:
            if feeding is not None:
                feeding.cancel()
