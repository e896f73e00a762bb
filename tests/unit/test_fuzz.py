"""Bad input never yields a traceback or an internal error (Hypothesis): the CLI and the MCP tools
get huge questions, control characters, other scripts, SPARQL and shell text inside a question,
invalid request ids and CSV handles, path traversal in handles. Each is answered — an answer
with a status, or a typed error (a CLI exit code with "error: …", a ToolError starting with its
code) — never a masked "Error calling tool" nor a Python traceback.

A real Retriever on the generated tiny lake answers; example counts stay small so the file runs
in seconds once the embedding index is warm.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fastmcp import Client
from fastmcp.exceptions import ToolError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures_embeddings import shared_cache_dir
from fixtures_lake import tiny_power_lake
from oda_analyst.cli import main
from oda_analyst.config import get_settings, load_settings
from oda_analyst.ontology.catalogue import load_catalogue
from oda_analyst.retriever import mcp_server
from oda_analyst.retriever.answer import AnswerPayload
from oda_analyst.retriever.grounding import embeddings
from oda_analyst.retriever.mcp_server import mcp
from oda_analyst.retriever.service import Retriever

NASTY = (
    "SELECT * WHERE { ?s ?p ?o } ; DROP ALL",
    "INSERT DATA { <urn:a> <urn:b> <urn:c> }",
    "power of node 900 on 1 June 2022 }} UNION { GRAPH ?g { ?s ?p ?o } } #",
    "$(rm -rf /) `id` ; cat /etc/passwd | nc 127.0.0.1 9 && echo $HOME",
    "../../../../etc/passwd",
    "..\\..\\windows\\system32",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "\x00\x01\x02\x1b[31mred\x1b[0m\r\n\t\x7f",
    "温度 节点 900 2022年6月1日",
    "درجة حرارة العقدة 900",
    "температура узла 900 1 июня 2022",
    "🔥🔥 node 900 power 💡",
    "\u202etotal power of node 900\u202c",
    "total power of node 900 on 1 June 2022 from 00:00 to 01:00" + " and" * 600,
    "node " + "9" * 5000,
    "x" * 4001,
    "",
    "   ",
)
HANDLES = (
    "../../etc/passwd",
    "/etc/passwd",
    "abc-0123456789abcdef01234567",
    "..%2f..%2fsecret-0123456789abcdef01234567",
    "a/../../b-0123456789abcdef01234567",
    "\x00",
    "q" * 201,
    "",
)
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)
QUESTIONS = st.one_of(
    st.sampled_from(NASTY),
    _TEXT,
    st.builds(lambda a, b: f"{a} {b}", st.sampled_from(NASTY), _TEXT),
)
IDS = st.one_of(st.sampled_from(HANDLES), _TEXT)
TYPED = re.compile(r"^[a-z_]+: \S")  # our ToolErrors: "<code>: <message> — <hint>"
FUZZ = settings(max_examples=12, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])  # fmt: skip


@pytest.fixture(scope="module")
def data(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """A lake, a data folder and the warm embedding vectors; the MCP server's Retriever on it."""
    lake = tiny_power_lake(tmp_path_factory.mktemp("lake"))
    cache = shared_cache_dir(request, tmp_path_factory)
    assert embeddings.get_index(load_catalogue(), cache_dir=cache / "embeddings") is not None
    data_dir = tmp_path_factory.mktemp("data")
    env = {"ODA_LAKE": str(lake), "ODA_DATA_DIR": str(data_dir), "ODA_CACHE_DIR": str(cache),
           "ODA_ROW_LIMIT": "5", "ODA_REDIS_URL": "", "ODA_SPARQL_ENDPOINT": "",
           "ODA_MCP_USER": "fuzz", "HF_HUB_OFFLINE": "1"}  # fmt: skip
    settings = load_settings(lake=str(lake), data_dir=data_dir, row_limit=5, redis_url=None,
                             sparql_endpoint=None)  # fmt: skip
    mcp_server.set_retriever(Retriever(settings))
    yield env
    mcp_server.reset_retriever()
    get_settings.cache_clear()


def _call(tool: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(mcp) as client:
            return await client.call_tool(tool, args)

    return anyio.run(go)


def _typed_or_answered(tool: str, args: dict[str, Any]) -> None:
    try:
        result = _call(tool, args)
    except ToolError as exc:
        text = str(exc)
        assert not text.startswith("Error calling tool"), f"internal error for {_short(args)}"
        # Our codes, or the schema's own validation message (bounds, types).
        assert TYPED.match(text) or "validation error" in text.lower(), text
        return
    if tool in ("query", "clarify"):
        AnswerPayload.model_validate(result.structured_content)


@FUZZ
@given(question=QUESTIONS)
def test_mcp_query_answers_or_refuses_any_question(data: dict[str, str], question: str) -> None:
    _typed_or_answered("query", {"question": question})


@FUZZ
@given(request_id=IDS, answer=QUESTIONS)
def test_mcp_clarify_and_status_refuse_bad_ids(
    data: dict[str, str], request_id: str, answer: str
) -> None:
    _typed_or_answered("clarify", {"request_id": request_id, "answer": answer})
    _typed_or_answered("status", {"request_id": request_id})


@FUZZ
@given(handle=IDS, offset=st.integers(min_value=-5, max_value=10**12))
def test_mcp_download_refuses_bad_handles(data: dict[str, str], handle: str, offset: int) -> None:
    _typed_or_answered("download_csv", {"handle": handle, "offset": offset})


def _short(args: Any) -> str:
    return repr(args)[:300]


def _cli(env: dict[str, str], *args: str) -> None:
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{_short(args)} raised {str(result.exception)[:300]}"
    )
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 1, 2, 3, 4), result.output
    if result.exit_code in (1, 2):  # a failure says what went wrong
        assert "error: " in result.output or "Error: " in result.output, result.output


@FUZZ
@given(question=QUESTIONS)
def test_cli_ask_answers_or_refuses_any_question(data: dict[str, str], question: str) -> None:
    _cli(data, "ask", question, "--json")


@FUZZ
@given(request_id=IDS, answer=QUESTIONS, handle=IDS)
def test_cli_clarify_and_csv_refuse_bad_ids(
    data: dict[str, str], request_id: str, answer: str, handle: str
) -> None:
    _cli(data, "clarify", request_id, answer, "--json")
    _cli(data, "csv", handle)


def test_the_nasty_handles_are_refused_by_name(data: dict[str, str], tmp_path: Path) -> None:
    for handle in HANDLES:
        with pytest.raises(ToolError, match=r"^usage_error: |validation error"):
            _call("download_csv", {"handle": handle})
