"""The web UI in headless Chromium over the real coordinator (in-process MCP servers, the
`sample` lake, real sandboxes), served by uvicorn on loopback.

The browser is the Debian ``chromium`` driven by Playwright (no browser download). Screenshots
of the main states go to ``test-artifacts/webui/`` (or ``$ODA_TEST_ARTIFACTS/webui``), not
committed: look at them after a run.
"""

from __future__ import annotations

import json
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
from oda_analyst.webui.serve import lake_coverage

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
SHOTS = Path(os.environ.get("ODA_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts"))
CACHE = Path(os.environ.get("ODA_CACHE", Path.home() / ".cache" / "oda-analyst"))
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
    app = create_app(coordinator, users, ui_history, secret="e2e", as_of=items["Q3"].as_of,
                     coverage=lake_coverage(coordinator_wiring["settings"]))  # fmt: skip
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
    # The clicked button was disabled under the keyboard's focus: the focus is back in the box.
    page.wait_for_function("document.activeElement?.id === 'question'", timeout=5_000)
    # The chosen metric is the one queried: the question's expected metrics are in the SPARQL.
    answer.locator("details.sparql summary").click()
    sparql = answer.locator("details.sparql pre").inner_text()
    for metric in item.expect["metrics"]:
        assert f"/metric/{metric}>" in sparql, (metric, sparql)
    _shot(page, "05-clarification-answered")
    # Answered, the clarification is closed, its buttons too, and stays so after a reload.
    assert "closed" in (asked.get_attribute("class") or "")
    page.reload()
    closed = page.locator(".msg.assistant").first
    closed.locator("button.candidate").first.wait_for()
    assert closed.locator("button.candidate:enabled").count() == 0
    assert closed.locator(".resolution").inner_text() == f"Answered: {item.clarify}"
    assert page.locator("#start-over").is_hidden()


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


HOT_INLET = "which nodes had hot inlet air 9-10 on jun 1"  # analysis1 A56: nodes 77 and 398


def _clarification_row(page: Any) -> Any:
    return page.locator(".msg.assistant", has=page.locator(".status.clarification")).first


@pytest.mark.e2e
@pytest.mark.slow
def test_a_threshold_clarification_is_answered_by_typing_and_stays_closed(
    browser: Any, ui_url: str
) -> None:
    page = _sign_in(browser, ui_url, "alice")
    asked = _ask(page, HOT_INLET)
    assert asked.locator(".status").inner_text().lower() == "clarification", asked.inner_text()
    assert asked.locator("button.candidate").count() == 0  # a threshold has no candidates
    # The clarification owns the box: its own prompt and label, a reply button, a way out.
    prompt = page.locator("#composer-prompt")
    assert prompt.is_visible() and "threshold" in prompt.inner_text().lower(), prompt.inner_text()
    assert page.locator("label[for=question]").inner_text() == "Your answer"
    assert page.locator("#question").get_attribute("placeholder") == "Your answer, e.g. above 30 °C"
    assert page.locator("#send").inner_text() == "Reply"
    assert page.locator("#start-over").is_visible()
    _shot(page, "20-threshold-asked")
    page.fill("#question", "above 30 °C")
    page.press("#question", "Enter")
    answer = page.locator(".msg.assistant:not(.pending)").nth(1)
    answer.wait_for(timeout=ANSWER_TIMEOUT_MS)
    # The reply went to the clarification (not out as a new question, which asked "what would
    # you like to know?"): the request completed with the threshold typed.
    assert answer.locator(".status").inner_text().lower() == "completed", answer.inner_text()
    assert "30" in answer.locator(".understood").inner_text()
    closed = _clarification_row(page)
    assert "closed" in (closed.get_attribute("class") or "")
    assert closed.locator(".resolution").inner_text() == "Answered: above 30 °C"
    assert prompt.is_hidden() and page.locator("#send").inner_text() == "Ask"
    _shot(page, "21-threshold-answered")
    page.reload()
    closed = _clarification_row(page)
    closed.wait_for()
    assert "closed" in (closed.get_attribute("class") or "")
    assert closed.locator(".resolution").inner_text() == "Answered: above 30 °C"
    assert prompt.is_hidden() and page.locator("#start-over").is_hidden()
    _shot(page, "22-reloaded-closed")


@pytest.mark.e2e
@pytest.mark.slow
def test_start_over_closes_the_clarification_and_asks_anew(browser: Any, ui_url: str) -> None:
    page = _sign_in(browser, ui_url, "alice")
    _ask(page, HOT_INLET)
    page.click("#start-over")
    row = _clarification_row(page)
    assert row.locator(".resolution").inner_text() == "Closed: started over."
    # The question comes back to be rephrased; it is sent as a new question, not as a reply.
    assert page.locator("#question").input_value() == HOT_INLET
    assert page.locator("#send").inner_text() == "Ask" and page.locator("#start-over").is_hidden()
    answer = _ask(page, HOT_INLET.replace("hot inlet air", "inlet air above 30 °C"))
    assert answer.locator(".status").inner_text().lower() == "completed", answer.inner_text()
    assert page.locator(".msg.user.reply").count() == 0
    page.reload()
    assert _clarification_row(page).locator(".resolution").inner_text() == (
        "Closed: a new question was asked."
    )


@pytest.mark.e2e
@pytest.mark.slow
def test_the_reference_time_control_on_a_june_2022_lake(browser: Any, ui_url: str) -> None:
    page = _sign_in(browser, ui_url, "alice")
    assert page.locator("#lake-range").inner_text() == "The lake covers May – June 2022"
    control, note = page.locator("#as-of"), page.locator("#reference-note")
    assert control.input_value() == "2022-06-15T00:00"  # the site's default (this fixture's)
    assert note.is_hidden()
    # Now (years after the lake): said at once, before any question is sent.
    page.click("#as-of-now")
    assert note.is_visible() and "after the lake" in note.inner_text(), note.inner_text()
    assert page.locator(".msg").count() == 0
    _shot(page, "23-reference-after-the-lake")
    control.fill("2022-06-02T10:00")
    assert note.is_hidden()
    answer = _ask(page, "node power of node 900 yesterday between 8 and 9")
    assert answer.locator(".status").inner_text().lower() == "completed", answer.inner_text()
    understood = answer.locator(".understood").inner_text()
    assert "1 Jun 2022 08:00 to 09:00" in understood, understood  # 'yesterday' from 2 June
    assert page.locator(".msg.user .asof").inner_text() == "reference time 2 Jun 2022, 10:00 UTC"
    _shot(page, "24-reference-time-answered")


@pytest.mark.e2e
@pytest.mark.slow
def test_a_window_outside_the_lake_is_said_before_any_other_question(
    browser: Any, ui_url: str
) -> None:
    page = _sign_in(browser, ui_url, "alice")
    answer = _ask(page, HOT_INLET.replace("jun 1", "1 march 2022"))
    assert answer.locator(".status").inner_text().lower() != "clarification", answer.inner_text()
    assert "no data" in answer.locator(".summary").inner_text().lower()


@pytest.mark.e2e
@pytest.mark.slow
def test_enter_sends_shift_enter_breaks_the_line_and_ask_is_busy_while_it_runs(
    browser: Any, ui_url: str, items: dict[str, retrieval_eval.Item]
) -> None:
    page = _sign_in(browser, ui_url, "bob")
    question = page.locator("#question")
    question.click()
    page.keyboard.type("GPU-0 utilisation of node 900")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("on 1 June 2022")
    assert question.input_value() == "GPU-0 utilisation of node 900\non 1 June 2022"
    assert page.locator(".msg").count() == 0  # Shift+Enter sent nothing
    question.fill(items["Q3"].text)
    send = page.locator("#ask button[type=submit]")
    # Every state the Ask button goes through, as the page shows it.
    send.evaluate(
        """b => { window.seen = [];
           const note = () => window.seen.push([b.disabled, b.textContent]);
           new MutationObserver(note).observe(b, {attributes: true, childList: true,
                                                  characterData: true, subtree: true}); }"""
    )
    began = time.monotonic()
    question.press("Enter")
    # Sent at once (the box emptied, the question shown), not a new line in the box.
    page.wait_for_function("() => document.querySelectorAll('.msg.user').length === 1",
                           timeout=5_000)  # fmt: skip
    assert question.input_value() == ""
    if send.is_disabled():
        _shot(page, "25-busy")
    answer = page.locator(".msg.assistant:not(.pending)").first
    answer.wait_for(timeout=ANSWER_TIMEOUT_MS)
    took = time.monotonic() - began
    assert answer.locator(".status").inner_text().lower() == "completed"
    seen = [(disabled, text) for disabled, text in page.evaluate("window.seen")]
    busy = [text for disabled, text in seen if disabled]
    assert busy and busy[0] == "Working… 0 s", seen
    if took > 2.5:  # the elapsed time is counted while it runs
        assert "Working… 1 s" in busy, seen
    assert send.is_enabled() and send.inner_text() == "Ask"
    assert page.locator(".msg.user .bubble").inner_text() == items["Q3"].text


@pytest.mark.e2e
@pytest.mark.slow
def test_the_question_box_and_the_conversations_stay_on_screen(
    alice_q3: dict[str, Any], ui_url: str
) -> None:
    page = alice_q3["page"]
    page.goto(page.url)  # the answered conversation as stored: question, plot, table
    page.locator(".msg.assistant img.plot").first.wait_for()
    height = page.viewport_size["height"]
    messages = page.locator("#messages")
    # The answer is taller than the window: the conversation scrolls, the page does not.
    assert messages.evaluate("m => m.scrollHeight > m.clientHeight")
    assert page.evaluate("document.documentElement.scrollHeight") <= height
    for part in ("#question", "#send", "#as-of", "nav .conversations li.current", "#sign-out"):
        box = page.locator(part).bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, (part, box)
    _shot(page, "26-long-answer-box-on-screen")


def _axe_script() -> Path:
    """axe-core's axe.min.js as scripts/setup_test.sh installed it (npm), never downloaded here."""
    named = os.environ.get("ODA_AXE_JS")
    found = (
        [Path(named)]
        if named
        else sorted(CACHE.glob("axe-core-*/node_modules/axe-core/axe.min.js"))
    )
    if not found or not found[-1].is_file():
        pytest.skip("axe-core is not installed (scripts/setup_test.sh installs it)")
    return found[-1]


def _axe(page: Any, name: str) -> list[dict[str, Any]]:
    """axe-core's violations on the page as it is (written to the artefacts, every impact)."""
    page.evaluate(_axe_script().read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
             .map(v => ({id: v.id, impact: v.impact, help: v.help,
                         nodes: v.nodes.map(n => n.target.join(' '))}))"""
    )
    folder = SHOTS / "webui"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"axe-{name}.json").write_text(json.dumps(found, indent=2), encoding="utf-8")
    return found


@pytest.mark.e2e
@pytest.mark.slow
def test_axe_finds_no_serious_accessibility_violation(
    browser: Any, ui_url: str, alice_q3: dict[str, Any], items: dict[str, retrieval_eval.Item]
) -> None:
    pages: dict[str, Any] = {}
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    pages["sign-in"] = context.new_page()
    pages["sign-in"].goto(f"{ui_url}/login")
    answered = alice_q3["page"]
    answered.goto(answered.url)
    answered.locator(".msg.assistant img.plot").first.wait_for()
    for part in ("details.steps-done", "details.rows", "details.sparql"):
        if answered.locator(part).count():
            answered.locator(f"{part} summary").first.click()
    pages["answer"] = answered
    asking = _sign_in(browser, ui_url, "bob")
    _ask(asking, items["Q6"].text)  # buttons, the prompt, start over
    pages["clarification"] = asking
    outside = _sign_in(browser, ui_url, "bob")
    outside.click("#as-of-now")  # the note that the reference time is after the lake
    pages["reference-after-the-lake"] = outside
    found = {name: _axe(page, name) for name, page in pages.items()}
    serious = [v for name in found for v in found[name] if v["impact"] in ("serious", "critical")]
    assert serious == [], json.dumps(found, indent=2)
    # Beyond the bar (no serious one): axe's default rules, best practices included, find
    # nothing of any impact (before, each chat page had no level-one heading).
    assert found == {name: [] for name in pages}, json.dumps(found, indent=2)
