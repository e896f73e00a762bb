"""The store contract against a real ``oxigraph serve`` on loopback and the embedded store alike,
and the VKG cache over HTTP (including two processes sharing one server)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pyoxigraph
import pytest

from oda_analyst.config import load_settings
from oda_analyst.errors import AccessDeniedError, StoreError
from oda_analyst.vkg.cache import EVERYONE, VKGCache, cache_key, vkg_graph_iri
from oda_analyst.vkg.factory import open_store
from oda_analyst.vkg.http_store import HttpSparqlStore, endpoint_urls
from oda_analyst.vkg.protocol import GraphStore
from oda_analyst.vkg.store import OxigraphStore
from processes import stop_process

pytestmark = pytest.mark.integration

XSD = "http://www.w3.org/2001/XMLSchema#"
G1 = "http://ex.test/g1"
G2 = "http://ex.test/g2"
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def oxigraph_cli() -> str:
    local = Path(sys.executable).parent / "oxigraph"
    if not local.exists():
        pytest.skip("the oxigraph server is not installed (pip install oxigraph)")
    return str(local)


def answers(base: str) -> bool:
    try:
        response = httpx.post(f"{base}/query", data={"query": "ASK {}"}, timeout=1)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


@pytest.fixture(scope="module")
def oxigraph_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``oxigraph serve`` on a free loopback port with an on-disk store, for this module."""
    location = tmp_path_factory.mktemp("oxigraph")
    port = free_port()
    proc = subprocess.Popen(
        [oxigraph_cli(), "serve", "--location", str(location), "--bind", f"{LOOPBACK}:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://{LOOPBACK}:{port}"
    try:
        deadline = time.monotonic() + 30
        while not answers(base):
            if proc.poll() is not None:
                output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                pytest.fail(f"oxigraph serve exited with {proc.returncode}:\n{output[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("oxigraph serve did not answer within 30 s")
            time.sleep(0.1)
        yield base
    finally:
        stop_process(proc)


@pytest.fixture(params=["embedded", "http"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, oxigraph_url: str
) -> Iterator[GraphStore]:
    """The same contract, two backends; each test starts from an empty dataset."""
    s: GraphStore
    if request.param == "http":
        s = HttpSparqlStore.from_endpoint(oxigraph_url)
        s.update("DROP SILENT ALL")
    else:
        s = OxigraphStore(tmp_path / "graph")
    yield s
    if request.param == "http":
        s.update("DROP SILENT ALL")
    s.close()


def triples(n: int, prefix: str = "s") -> bytes:
    return "".join(
        f'<http://ex.test/{prefix}/{i}> <http://ex.test/v> "{i}"^^<{XSD}integer> .\n'
        for i in range(n)
    ).encode()


TYPED = (
    f'<http://ex.test/a> <http://ex.test/when> "2022-06-01T20:00:07.250Z"^^<{XSD}dateTime> .\n'
    f'<http://ex.test/a> <http://ex.test/power> "652.5"^^<{XSD}double> .\n'
    f'<http://ex.test/a> <http://ex.test/count> "42"^^<{XSD}integer> .\n'
    f'<http://ex.test/a> <http://ex.test/name> "rack \\"45\\""^^<{XSD}string> .\n'
    f"<http://ex.test/a> <http://ex.test/rack> <http://ex.test/rack/45> .\n"
).encode()


def canonical_ntriples(data: bytes) -> bytes:
    """The data as a store writes it back (canonical literals: ``.25Z``, no ``^^xsd:string``)."""
    scratch = pyoxigraph.Store()
    scratch.load(data, pyoxigraph.RdfFormat.N_TRIPLES)
    return scratch.dump(format=pyoxigraph.RdfFormat.N_TRIPLES, from_graph=pyoxigraph.DefaultGraph())


# -- the store contract -------------------------------------------------------------------------


def test_store_contract(store: GraphStore) -> None:
    assert isinstance(store, GraphStore)
    # bulk load, bytes and chunks, set semantics
    assert store.load_ntriples(G1, TYPED) == 5
    data = triples(40)
    assert store.load_ntriples(G2, (data[i : i + 9] for i in range(0, len(data), 9))) == 40
    assert store.load_ntriples(G2, triples(45)) == 5
    assert (store.count_triples(G1), store.count_triples(G2)) == (5, 45)
    assert set(store.graphs()) >= {G1, G2}

    # the default graph of a query is the named graph given, and nothing else is reachable
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    assert store.query(count, default_graph=G1).scalar() == 5
    assert store.query(count, default_graph=G2).scalar() == 45
    assert store.query(f"SELECT (COUNT(*) AS ?n) FROM <{G2}> WHERE {{ ?s ?p ?o }}",
                       default_graph=G1).scalar() == 5  # fmt: skip
    graphs_seen = store.query(
        "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }", default_graph=G1
    )
    assert graphs_seen.rows == [(G1,)]

    # typed values
    result = store.query(
        "SELECT ?p ?o WHERE { <http://ex.test/a> ?p ?o } ORDER BY ?p", default_graph=G1
    )
    assert result.columns == ("p", "o")
    got = {str(p).rsplit("/", 1)[-1]: o for p, o in result.rows}
    assert got == {
        "when": datetime(2022, 6, 1, 20, 0, 7, 250000, tzinfo=UTC),
        "power": 652.5,
        "count": 42,
        "name": 'rack "45"',
        "rack": "http://ex.test/rack/45",
    }
    assert type(got["count"]) is int and isinstance(got["power"], float)

    # ASK and CONSTRUCT
    assert store.query("ASK { ?s <http://ex.test/count> 42 }", default_graph=G1).boolean is True
    assert store.query("ASK { ?s <http://ex.test/count> 7 }", default_graph=G1).boolean is False
    built = store.query(
        "CONSTRUCT { ?s <http://ex.test/n> ?o } WHERE { ?s <http://ex.test/count> ?o }",
        default_graph=G1,
    )
    assert built.rows == [("http://ex.test/a", "http://ex.test/n", 42)]

    # sizes
    # the size of the graph's canonical N-Triples (e.g. no ^^xsd:string), exact when small
    assert store.graph_bytes(G1) == len(canonical_ntriples(TYPED))
    assert store.graph_bytes("http://ex.test/none") == 0

    # drop and existence
    store.drop_graph(G2)
    assert not store.graph_exists(G2) and store.graph_exists(G1)
    assert store.count_triples(G2) == 0
    store.drop_graph(G2)


def test_store_errors(store: GraphStore) -> None:
    with pytest.raises(StoreError) as info:
        store.query("SELECT ?s\nWHERE { ?s ?p }", default_graph=G1)
    assert "syntax error" in info.value.message and "error at 2:" in info.value.message
    with pytest.raises(StoreError) as info:
        store.load_ntriples(G1, triples(2) + b"<http://ex.test/x> <http://ex.test/p> .\n")
    assert "line 3" in info.value.message
    assert not store.graph_exists(G1)
    with pytest.raises(StoreError):
        store.count_triples("http://ex.test/a> } DROP ALL {")


def test_cache_over_both_backends(store: GraphStore) -> None:
    now = [datetime(2024, 1, 1, tzinfo=UTC)]

    def clock() -> datetime:
        now[0] += timedelta(seconds=1)
        return now[0]

    cache = VKGCache(store, capacity=2, clock=clock)
    calls: list[str] = []

    def build(graph: str) -> int:
        calls.append(graph)
        return store.load_ntriples(graph, triples(4))

    keys = [cache_key({"nodes": [n]}) for n in (1, 2, 3)]
    first = cache.get_or_build(keys[0], build, owner="alice", allowed_users=["bob"])
    assert (first.hit, first.triples) == (False, 4)
    assert cache.get_or_build(keys[0], build, owner="bob").hit
    with pytest.raises(AccessDeniedError):
        cache.get_or_build(keys[0], build, owner="eve")
    cache.get_or_build(keys[1], build, owner="alice")
    cache.get_or_build(keys[0], build, owner="alice")  # a hit: keys[1] is now the oldest
    cache.get_or_build(keys[2], build, owner="alice")
    assert {e.key for e in cache.entries()} == {keys[0], keys[2]}
    assert not store.graph_exists(vkg_graph_iri(keys[1]))
    assert len(calls) == 3
    # a query over the cached graph alone
    n = store.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", default_graph=first.graph)
    assert n.scalar() == 4


# -- HTTP specifics -----------------------------------------------------------------------------


def test_endpoint_urls() -> None:
    assert endpoint_urls("http://h:7878/") == (
        "http://h:7878/query",
        "http://h:7878/update",
        "http://h:7878/store",
    )
    assert endpoint_urls("http://h:7878/query")[1] == "http://h:7878/update"
    with pytest.raises(StoreError):
        endpoint_urls("h:7878")


def test_an_unreachable_endpoint_says_what_to_check() -> None:
    store = HttpSparqlStore.from_endpoint(f"http://{LOOPBACK}:{free_port()}")
    with pytest.raises(StoreError) as info:
        store.graphs()
    assert "cannot reach" in info.value.message
    assert info.value.hint is not None and "ODA_SPARQL_ENDPOINT" in info.value.hint
    store.close()


def test_a_wrong_path_is_not_a_sparql_service(oxigraph_url: str) -> None:
    store = HttpSparqlStore(f"{oxigraph_url}/nope", f"{oxigraph_url}/nope", f"{oxigraph_url}/nope")
    with pytest.raises(StoreError, match="not a SPARQL service"):
        store.graphs()
    store.close()


def test_open_store_uses_the_endpoint_when_set(oxigraph_url: str, tmp_path: Path) -> None:
    settings = load_settings(sparql_endpoint=oxigraph_url, data_dir=tmp_path)
    store = open_store(settings)
    try:
        assert isinstance(store, HttpSparqlStore)
        assert store.query_url == f"{oxigraph_url}/query"
        assert store.query("ASK {}").boolean is True
    finally:
        store.close()
    assert not (tmp_path / "graph").exists()


WORKER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from oda_analyst.vkg.cache import VKGCache
    from oda_analyst.vkg.http_store import HttpSparqlStore

    url, key, work, name = sys.argv[1:5]
    work = Path(work)
    store = HttpSparqlStore.from_endpoint(url)
    cache = VKGCache(store, 8, lock_dir=work / "locks")

    def build(graph):
        (work / f"built-by-{name}").touch()
        (work / "entered").touch()
        while not (work / "go").exists():
            time.sleep(0.02)
        data = b"<http://ex.test/a> <http://ex.test/p> <http://ex.test/b> .\\n"
        return store.load_ntriples(graph, data)

    entry = cache.get_or_build(key, build, owner="alice")
    print(json.dumps({"hit": entry.hit, "graph": entry.graph}))
    """
)


def test_two_processes_sharing_a_server_build_once(oxigraph_url: str, tmp_path: Path) -> None:
    HttpSparqlStore.from_endpoint(oxigraph_url).update("DROP SILENT ALL")
    key = cache_key({"nodes": [900], "test": "two-processes"})

    def spawn(name: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", WORKER, oxigraph_url, key, str(tmp_path), name]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first = spawn("first")
    deadline = time.monotonic() + 60
    while not (tmp_path / "entered").exists():  # the first process holds the key's lock now
        assert first.poll() is None, first.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    second = spawn("second")
    (tmp_path / "go").touch()
    outputs = [p.communicate(timeout=60) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], [err for _, err in outputs]
    results = [json.loads(out) for out, _ in outputs]
    assert [r["hit"] for r in results] == [False, True]
    assert {r["graph"] for r in results} == {vkg_graph_iri(key)}
    assert sorted(p.name for p in tmp_path.glob("built-by-*")) == ["built-by-first"]


def test_everyone_and_concurrent_threads_over_http(oxigraph_url: str) -> None:
    store = HttpSparqlStore.from_endpoint(oxigraph_url)
    store.update("DROP SILENT ALL")
    cache = VKGCache(store, 4)
    calls: list[str] = []
    gate = threading.Event()

    def build(graph: str) -> int:
        calls.append(graph)
        gate.wait(timeout=30)
        return store.load_ntriples(graph, triples(3))

    key = cache_key({"nodes": [1, 2], "test": "threads"})
    results: list[object] = []

    def ask(i: int) -> None:
        try:
            results.append(cache.get_or_build(key, build, owner=f"u{i}", allowed_users=[EVERYONE]))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    for t in threads:
        t.join(timeout=60)
    assert len(calls) == 1
    assert sorted(getattr(r, "hit", None) for r in results) == [False] + [True] * 5
    store.close()
