"""The graph store over HTTP: SPARQL 1.1 Protocol (query, update) and the SPARQL 1.1 Graph Store
HTTP Protocol (bulk load into a named graph), for Oxigraph server, GraphDB, Fuseki and the like.

URLs (``endpoint_urls``): Oxigraph server answers ``/query``, ``/update`` and ``/store`` under one
base URL, which is the default; other servers name their own (Fuseki ``/<ds>/query``,
``/<ds>/update``, ``/<ds>/data``; GraphDB ``/repositories/<r>``, ``/repositories/<r>/statements``,
``/repositories/<r>/rdf-graphs/service``), passed explicitly.

Results are requested as SPARQL JSON (N-Triples for CONSTRUCT/DESCRIBE) and parsed by pyoxigraph,
so values convert exactly as in the embedded store. A per-request dataset uses the protocol's
``default-graph-uri``/``named-graph-uri`` parameters, which override FROM clauses in the text.
Oxigraph answers a HEAD on a missing graph with a body that breaks keep-alive, so existence is
asked with ``ASK`` instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import httpx
import pyoxigraph as ox

from oda_analyst.errors import StoreError
from oda_analyst.vkg.protocol import QueryResult
from oda_analyst.vkg.store import result_from_pyoxigraph, syntax_error
from oda_analyst.vkg.values import check_iri, count_query, estimate_bytes, sample_query

if TYPE_CHECKING:
    from oda_analyst.config import Settings

RESULTS_JSON = "application/sparql-results+json"
N_TRIPLES = "application/n-triples"
_ACCEPT = f"{RESULTS_JSON}, {N_TRIPLES};q=0.9"
_TEXT_LIMIT = 500

Auth = httpx.Auth | tuple[str, str] | None


def endpoint_urls(endpoint: str) -> tuple[str, str, str]:
    """(query, update, graph store) URLs of an Oxigraph-style server from its base URL or its
    query URL (``…/query`` or ``…/sparql``)."""
    url = endpoint.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise StoreError(
            f"not an HTTP(S) SPARQL endpoint: {endpoint!r}",
            hint="set ODA_SPARQL_ENDPOINT to e.g. http://oxigraph:7878",
        )
    root, _, last = url.rpartition("/")
    if last in ("query", "sparql"):
        return url, f"{root}/update", f"{root}/store"
    return f"{url}/query", f"{url}/update", f"{url}/store"


class HttpSparqlStore:
    """A SPARQL 1.1 endpoint as a GraphStore. Thread-safe (one pooled httpx client)."""

    def __init__(
        self,
        query_url: str,
        update_url: str,
        gsp_url: str,
        *,
        auth: Auth = None,
        timeout: float = 60.0,
    ) -> None:
        self.query_url = query_url
        self.update_url = update_url
        self.gsp_url = gsp_url
        self._client = httpx.Client(auth=auth, timeout=httpx.Timeout(timeout, connect=5.0))

    @classmethod
    def from_endpoint(
        cls,
        endpoint: str,
        *,
        update_url: str | None = None,
        gsp_url: str | None = None,
        auth: Auth = None,
        timeout: float = 60.0,
    ) -> HttpSparqlStore:
        query, update, gsp = endpoint_urls(endpoint)
        return cls(query, update_url or update, gsp_url or gsp, auth=auth, timeout=timeout)

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpSparqlStore:
        """From ``ODA_SPARQL_ENDPOINT`` (+ optional ``ODA_SPARQL_UPDATE_URL``,
        ``ODA_SPARQL_GSP_URL``, ``ODA_SPARQL_USER``/``ODA_SPARQL_PASSWORD``)."""
        user = settings.sparql_user
        password = settings.sparql_password
        return cls.from_endpoint(
            str(settings.sparql_endpoint or ""),
            update_url=settings.sparql_update_url,
            gsp_url=settings.sparql_gsp_url,
            auth=(str(user), str(password or "")) if user else None,
        )

    # -- transport -------------------------------------------------------------------------------

    def _send(self, what: str, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._client.request(method, url, **kwargs)
        except httpx.TimeoutException:
            raise StoreError(
                f"{what}: the SPARQL endpoint {url} did not answer in time",
                hint="narrow the request, raise the timeout, or check the server's load",
            ) from None
        except httpx.HTTPError as exc:
            raise StoreError(
                f"{what}: cannot reach the SPARQL endpoint {url} ({exc})",
                hint="check ODA_SPARQL_ENDPOINT (scheme, host, port) and that the server runs",
            ) from None
        if response.is_success:
            return response
        raise _http_error(what, url, response, kwargs.get("data"))

    def _sparql(
        self, text: str, default_graph: str | None, timeout_s: float | None
    ) -> httpx.Response:
        form: dict[str, str] = {"query": text}
        if default_graph is not None:
            form["default-graph-uri"] = check_iri(default_graph)
            form["named-graph-uri"] = default_graph
        timeout = (
            httpx.USE_CLIENT_DEFAULT if timeout_s is None else httpx.Timeout(timeout_s, connect=5.0)
        )
        return self._send(
            "query", "POST", self.query_url, data=form, headers={"Accept": _ACCEPT}, timeout=timeout
        )

    # -- GraphStore ------------------------------------------------------------------------------

    def load_ntriples(self, graph: str, data: bytes | Iterable[bytes]) -> int:
        check_iri(graph)
        before = self.count_triples(graph) if self.graph_exists(graph) else 0
        try:
            self._send(
                f"loading into <{graph}>",
                "POST",
                self.gsp_url,
                params={"graph": graph},
                content=data if isinstance(data, bytes) else iter(data),
                headers={"Content-Type": N_TRIPLES},
            )
        except StoreError:
            if before == 0:
                self.drop_graph(graph)
            raise
        return self.count_triples(graph) - before

    def query(
        self, sparql: str, *, default_graph: str | None = None, timeout_s: float | None = None
    ) -> QueryResult:
        response = self._sparql(sparql, default_graph, timeout_s)
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        try:
            if content_type == N_TRIPLES:
                return result_from_pyoxigraph(ox.parse(response.content, ox.RdfFormat.N_TRIPLES))
            parsed = ox.parse_query_results(response.content, ox.QueryResultsFormat.JSON)
        except (SyntaxError, ValueError) as exc:
            raise StoreError(
                f"the endpoint answered {content_type or 'no content type'} that cannot be read "
                f"as SPARQL results: {exc}",
                hint="point ODA_SPARQL_ENDPOINT at the SPARQL query service itself",
            ) from None
        return result_from_pyoxigraph(parsed)

    def update(self, sparql_update: str) -> None:
        self._send("update", "POST", self.update_url, data={"update": sparql_update})

    def graph_exists(self, graph: str) -> bool:
        text = f"ASK {{ GRAPH <{check_iri(graph)}> {{ ?s ?p ?o }} }}"
        return bool(self.query(text).boolean)

    def drop_graph(self, graph: str) -> None:
        self.update(f"DROP SILENT GRAPH <{check_iri(graph)}>")

    def count_triples(self, graph: str) -> int:
        return int(self.query(count_query(graph)).scalar())

    def graph_bytes(self, graph: str) -> int:
        response = self._sparql(sample_query(graph), None, None)
        sample_triples = sum(1 for line in response.content.splitlines() if line.strip())
        if sample_triples == 0:
            return 0
        total = self.count_triples(graph)
        return estimate_bytes(len(response.content), sample_triples, total)

    def graphs(self) -> list[str]:
        result = self.query("SELECT DISTINCT ?g WHERE { GRAPH ?g { } }")
        return sorted(str(row[0]) for row in result.rows if not str(row[0]).startswith("_:"))

    def close(self) -> None:
        self._client.close()


def _http_error(what: str, url: str, response: httpx.Response, form: Any) -> StoreError:
    body = response.text.strip()
    code = response.status_code
    if code == 400:
        text = None
        if isinstance(form, dict):
            text = form.get("query") or form.get("update")
        kind = "N-Triples" if "graph" in response.request.url.params else "SPARQL"
        return syntax_error(kind, SyntaxError(body[:_TEXT_LIMIT]), text)
    if code in (401, 403):
        return StoreError(
            f"{what}: the SPARQL endpoint {url} refused access (HTTP {code})",
            hint="set ODA_SPARQL_USER and ODA_SPARQL_PASSWORD to an account that may read/write",
        )
    if code in (404, 405):
        return StoreError(
            f"{what}: {url} is not a SPARQL service (HTTP {code})",
            hint="check the endpoint URLs: Oxigraph serves /query, /update and /store",
        )
    return StoreError(
        f"{what}: the SPARQL endpoint {url} failed (HTTP {code}): {body[:_TEXT_LIMIT]}",
        hint="see the server's log; retry if the server was restarting",
    )
