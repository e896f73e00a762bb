"""The web UI in headless Chromium over the real coordinator (in-process MCP servers, the
`sample` lake, real sandboxes), served by uvicorn on loopback.

The browser is the Debian ``chromium`` driven by Playwright (no browser download). Screenshots
of the main states go to ``test-artifacts/webui/`` (or ``$ODA_TEST_ARTIFACTS/webui``), not
committed: look at them after a run.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

import retrieval_eval
from oda_analyst import analyst
from oda_analyst.coordinator.service import Coordinator
from oda_analyst.reading.read import read_now
from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import hash_password
from oda_analyst.webui.history import History

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
SHOTS = Path(os.environ.get("ODA_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts"))
ANSWER_TIMEOUT_MS = 600_000  # the first question builds its graph and starts a sandbox
USERS = {"alice": "alice-pass", "bob": "bob-pass"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ui_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    history = History(tmp_path_factory.mktemp("webui") / "history.sqlite")
    yield history
    history.close()


@pytest.fixture(scope="module")
def ui_url(
    coordinator_wiring: dict[str, Any],
    items: dict[str, retrieval_eval.Item],
    ui_history: History,
) -> Iterator[str]:
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    coordinator = Coordinator(
        coordinator_wiring["settings"],
        retriever=coordinator_wiring["retriever"],
        codeagent=coordinator_wiring["codeagent"],
        glossary=analyst.glossary(),
        reader=read_now,
    )
    users = {u: hash_password(p) for u, p in USERS.items()}
    app = create_app(coordinator, users, ui_history, secret="e2e", as_of=items["Q3"].as_of)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            pytest.fail("the UI server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


def _shot(page: Any, name: str) -> None:
    folder = SHOTS / "webui"
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def _sign_in(browser: Any, url: str, user: str) -> Any:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/")
    assert page.url.endswith("/login")
    page.fill("input[name=user]", user)
    page.fill("input[name=password]", USERS[user])
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")
    return page


def _ask(page: Any, text: str, working_shot: str | None = None) -> Any:
    before = page.locator(".msg.assistant").count()
    page.fill("#question", text)
    page.click("#ask button[type=submit]")
    # A quick answer (a clarification) can replace the pending message before a step is seen:
    # wait for whichever comes first, the first streamed step or the answer itself.
    page.wait_for_function(
        """before => document.querySelector('.msg.assistant.pending .steps li') !== null
                  || document.querySelectorAll('.msg.assistant:not(.pending)').length > before""",
        arg=before,
        timeout=ANSWER_TIMEOUT_MS,
    )
    if working_shot and page.locator(".msg.assistant.pending .steps li").count():
        _shot(page, working_shot)  # the steps as they stream (it may be done a moment later)
    answer = page.locator(".msg.assistant:not(.pending)").nth(before)
    answer.wait_for(timeout=ANSWER_TIMEOUT_MS)
    return answer


@pytest.fixture(scope="module")
def alice_q3(browser: Any, ui_url: str, items: dict[str, retrieval_eval.Item]) -> dict[str, Any]:
    """Alice signed in and asked Appendix-A Q3: her page and its answer."""
    page = _sign_in(browser, ui_url, "alice")
    _shot(page, "01-signed-in")
    answer = _ask(page, items["Q3"].text, working_shot="01b-q3-working")
    return {"page": page, "answer": answer}


def _png_width(data: bytes) -> int:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    return int.from_bytes(data[16:20], "big")  # IHDR: width is the first field


@pytest.mark.e2e
@pytest.mark.slow
def test_sign_in_ask_q3_and_see_the_plot_the_steps_and_the_sparql(
    alice_q3: dict[str, Any], ui_url: str
) -> None:
    page, answer = alice_q3["page"], alice_q3["answer"]
    assert answer.locator(".status").inner_text().lower() == "completed"
    understood = answer.locator(".understood").inner_text()
    assert "900" in understood and "920" in understood, understood
    steps = answer.locator(".steps li").all_inner_texts()
    assert len(steps) >= 2, steps
    plot = answer.locator("img.plot")
    assert plot.count() == 1
    plot.evaluate("img => img.decode()")  # the browser loaded it as a picture
    assert plot.evaluate("img => img.naturalWidth") >= 800
    src = plot.get_attribute("src")
    png = page.request.get(f"{ui_url}{src}")
    assert png.status == 200 and png.headers["content-type"] == "image/png"
    assert _png_width(png.body()) >= 800
    download = page.request.get(f"{ui_url}{src}?download=1")
    assert "attachment" in download.headers["content-disposition"]
    answer.locator("details.sparql summary").click()
    sparql = answer.locator("details.sparql pre").inner_text()
    assert "SELECT" in sparql.upper() and "gpu0_gpu_utilization" in sparql.lower(), sparql
    _shot(page, "02-q3-answered")


@pytest.mark.e2e
@pytest.mark.slow
def test_a_second_user_cannot_open_the_first_users_conversation_or_plot(
    browser: Any, ui_url: str, alice_q3: dict[str, Any]
) -> None:
    conversation = alice_q3["page"].url
    assert "/c/" in conversation, conversation
    cid = conversation.split("/c/")[1]
    artifact = ui_url + str(alice_q3["answer"].locator("img.plot").get_attribute("src"))
    page = _sign_in(browser, ui_url, "bob")
    assert cid not in page.content()
    response = page.goto(conversation)
    assert response is not None and response.status == 404
    _shot(page, "03-other-users-conversation")
    assert page.request.get(artifact).status == 404
    assert page.request.get(f"{ui_url}/api/conversations/{cid}").status == 404
    page.goto(f"{ui_url}/")
    page.click("#sign-out")
    page.wait_for_url(f"{ui_url}/login")
    assert page.request.get(artifact).status == 401


@pytest.mark.e2e
@pytest.mark.slow
def test_a_clarification_is_answered_by_clicking_a_candidate(
    browser: Any, ui_url: str, items: dict[str, retrieval_eval.Item]
) -> None:
    item = items["Q6"]  # the designed exchange: which temperature? ambient
    assert item.clarify
    page = _sign_in(browser, ui_url, "alice")
    asked = _ask(page, item.text)
    assert asked.locator(".status").inner_text().lower() == "clarification"
    buttons = asked.locator("button.candidate")
    labels = buttons.all_inner_texts()
    assert len(labels) >= 2, labels
    _shot(page, "04-clarification")
    chosen = next(i for i, label in enumerate(labels) if item.clarify in label.lower())
    buttons.nth(chosen).click()
    answer = page.locator(".msg.assistant:not(.pending)").nth(1)
    answer.wait_for(timeout=ANSWER_TIMEOUT_MS)
    assert answer.locator(".status").inner_text().lower() == "completed"
    assert answer.locator("img.plot").count() == 1
    # The chosen metric is the one queried: the question's expected metrics are in the SPARQL.
    answer.locator("details.sparql summary").click()
    sparql = answer.locator("details.sparql pre").inner_text()
    for metric in item.expect["metrics"]:
        assert f"/metric/{metric}>" in sparql, (metric, sparql)
    _shot(page, "05-clarification-answered")


@pytest.mark.e2e
@pytest.mark.slow
def test_feedback_on_an_answer_is_stored_with_its_request_id(
    alice_q3: dict[str, Any], ui_history: History
) -> None:
    page, answer = alice_q3["page"], alice_q3["answer"]
    answer.locator(".feedback input.comment").fill("node 920 looks low after 11:00")
    answer.locator(".feedback button.down").click()
    answer.locator(".feedback .sent", has_text="recorded").wait_for()
    cid = page.url.split("/c/")[1]
    stored = [m for m in ui_history.messages("alice", cid) if m.role == "assistant"]
    assert stored
    feedback = ui_history.feedback(stored[0].id)
    assert feedback == (-1, "node 920 looks low after 11:00", stored[0].payload["request_id"])
    assert feedback[2]
    _shot(page, "06-feedback")
    # The conversation comes back from the history: question, answer, plot, SPARQL.
    page.reload()
    page.locator(".msg.assistant img.plot").first.wait_for()
    assert page.locator(".msg.user .bubble").first.inner_text().startswith("Retrieve GPU-0")
    assert page.locator(".msg.assistant details.sparql").count() >= 1
    _shot(page, "07-reloaded")
