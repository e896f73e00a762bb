"""Only the reader takes a question's text: every other part takes the Reading.

A function "takes the text" when a parameter named ``question``/``utterance``/``question_text``/
``request_text`` (or ``text`` in the parts that act on a request) is a ``str``. Outside
``reading/`` only the entry points that hand the text to the reader, the model paths (a prompt
sees the text), the baselines (separate systems by design) and the carriers that pass the text
on unread may take it; each is listed here with why. A new function that takes the text fails
this test: take the Reading (or a field of it) instead.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import oda_analyst

PACKAGE = Path(oda_analyst.__file__).parent
NAMES = frozenset({"question", "utterance", "question_text", "request_text"})
TEXT_IN = ("retriever/*", "coordinator/*", "controller/analysis*", "controller/alerts*")
READERS = ("reading/*", "retriever/model_paths/*", "baselines/*")
ALLOWED = {
    # entry points: they hand the text to the reader (or to the service that reads it)
    ("cli.py", "ask"): "the command line's question",
    ("webui/app.py", "ask"): "the web UI's question",
    ("backends.py", "query"): "the retrieval backends' common entry",
    ("retriever/service.py", "query"): "the retriever's entry: reads the question once",
    ("retriever/service.py", "understand"): "the operator's entry: reads the question once",
    ("coordinator/service.py", "ask"): "the coordinator's entry: reads the question once",
    ("controller/alerts.py", "get_alert_query"): "writes a question from an alert",
    # carriers: they pass the text on, unread
    ("retriever/state.py", "new_request"): "keeps the text in the request's checkpoint",
    ("retriever/service.py", "_bounded"): "checks its length only",
    ("coordinator/subagents.py", "query"): "the retriever's MCP client sends the text",
    ("coordinator/planner.py", "_decided"): "keeps the text in a clarification to resume",
    ("controller/port.py", "understand"): "the operator's port to the pipeline",
    ("controller/port.py", "retrieve"): "the operator's port to the pipeline",
    ("controller/port_http.py", "understand"): "the operator's client of the analyst's port",
    ("controller/port_http.py", "retrieve"): "the operator's client of the analyst's port",
    ("controller/port_wire.py", "understand_request"): "the port's message, as JSON",
    ("controller/port_wire.py", "retrieve_request"): "the port's message, as JSON",
    ("pipeline/local.py", "understand"): "the port's work, in the analyst",
    ("pipeline/local.py", "retrieve"): "the port's work, in the analyst",
    ("pipeline/local.py", "_baseline"): "a baseline answers from the text",
    ("pipeline/coordinated.py", "_answer"): "the coordinator's adapter",
    ("pipeline/coordinated.py", "coordinated_answer"): "the coordinator's adapter",
    # model prompts: the model reads the words it is asked about
    ("retriever/service.py", "_reviewer"): "the model's completeness review prompt",
    ("retriever/service.py", "_writer"): "the model's SPARQL prompt",
    ("retriever/grounding/ground.py", "classify_intent"): "the model hooks' protocol",
    ("retriever/grounding/ground.py", "decompose"): "the model hooks' protocol",
    ("retriever/stages/stage1.py", "classify_intent"): "the guarded model hooks",
    ("retriever/stages/stage1.py", "decompose"): "the guarded model hooks",
}


def _takes_text(fn: ast.FunctionDef | ast.AsyncFunctionDef, rel: str) -> bool:
    names = NAMES | ({"text"} if any(fnmatch.fnmatch(rel, g) for g in TEXT_IN) else set())
    for arg in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
        if arg.arg not in names:
            continue
        ann = arg.annotation
        if ann is None and arg.arg in ("question", "text"):
            return True
        if isinstance(ann, ast.Name | ast.Constant) and getattr(ann, "id", None) == "str":
            return True
        if isinstance(ann, ast.Constant) and ann.value == "str":
            return True
    return False


def _text_takers() -> set[tuple[str, str]]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if any(fnmatch.fnmatch(rel, g) for g in READERS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _takes_text(node, rel):
                found.add((rel, node.name))
    return found


def test_only_the_reader_takes_the_question_text() -> None:
    unexpected = sorted(_text_takers() - set(ALLOWED))
    assert not unexpected, (
        f"these take the question's text outside the reader: {unexpected}; take the Reading"
    )


def test_the_allow_list_names_only_functions_that_exist() -> None:
    stale = sorted(set(ALLOWED) - _text_takers())
    assert not stale, f"allowed but no longer taking the text (drop them): {stale}"


def test_the_check_sees_a_function_that_takes_the_text() -> None:
    tree = ast.parse("def plan(question: str) -> None: ...\ndef fit(text: str) -> None: ...")
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert [_takes_text(f, "retriever/stages/x.py") for f in fns] == [True, True]
    assert [_takes_text(f, "lake/x.py") for f in fns] == [True, False]
