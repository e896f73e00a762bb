"""Issue 31 item 1, the server's side: the reference time a question is asked with, the lake's
range on the page, and answers without command lines. The coordinator records what it is
called with; the browser test in tests/e2e drives the page itself."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from starlette.testclient import TestClient

from oda_analyst.config import load_settings
from oda_analyst.errors import ConfigError
from oda_analyst.webui.answers import view, without_commands
from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import hash_password
from oda_analyst.webui.coverage import Coverage, from_months
from oda_analyst.webui.history import History
from oda_analyst.webui.serve import lake_coverage, reference_time

JUNE_15 = datetime(2022, 6, 15, tzinfo=UTC)


class _Answer(BaseModel):
    status: str
    request_id: str
    summary: str


class _Recorder:
    """Answers at once and keeps the reference time of each ask."""

    def __init__(self) -> None:
        self.as_of: list[datetime | None] = []
        self.replies: list[str] = []

    async def ask(self, question: str, *, user: str, as_of: datetime | None = None,
                  **_: Any) -> _Answer:  # fmt: skip
        self.as_of.append(as_of)
        return _Answer(status="completed", request_id="r", summary="done")

    async def clarify(self, conversation_id: str, answer: str, *, user: str,
                      progress: Any = None) -> _Answer:  # fmt: skip
        self.replies.append(answer)
        return _Answer(status="completed", request_id="r", summary="done")


def _client(tmp_path: Path, coverage: Coverage | None = None) -> tuple[TestClient, _Recorder]:
    recorder = _Recorder()
    app = create_app(recorder, {"alice": hash_password("a")}, History(tmp_path / "h.sqlite"),
                     secret="t", as_of=JUNE_15, coverage=coverage)  # fmt: skip
    client = TestClient(app)
    assert client.post("/login", data={"user": "alice", "password": "a"}).status_code == 200
    return client, recorder


def _ask(client: TestClient, **body: Any) -> list[dict[str, Any]]:
    r = client.post("/api/ask", json={"text": "power of node 5 yesterday", **body})
    assert r.status_code == 200, r.text
    return [json.loads(line) for line in r.text.splitlines()]


def test_a_question_is_asked_at_the_reference_time_the_page_sends(tmp_path: Path) -> None:
    client, recorder = _client(tmp_path)
    events = _ask(client, as_of="2022-06-02T10:00")
    _ask(client, as_of="2022-06-02T12:00:00+02:00")
    _ask(client)  # no time sent: the site's default
    assert recorder.as_of == [
        datetime(2022, 6, 2, 10, tzinfo=UTC),
        datetime(2022, 6, 2, 10, tzinfo=UTC),
        JUNE_15,
    ]
    stored = client.get(f"/api/conversations/{events[0]['id']}").json()["messages"]
    assert stored[0]["as_of"] == "2022-06-02T10:00:00+00:00"  # shown under the question


def test_a_reply_resumes_its_request_and_takes_no_reference_time(tmp_path: Path) -> None:
    client, recorder = _client(tmp_path)
    cid = _ask(client)[0]["id"]
    events = _ask(client, text="above 45 °C", conversation_id=cid, clarify=True,
                  as_of="2030-01-01T00:00")  # fmt: skip
    assert recorder.replies == ["above 45 °C"] and len(recorder.as_of) == 1
    stored = client.get(f"/api/conversations/{events[0]['id']}").json()["messages"]
    assert stored[2] == {"id": stored[2]["id"], "role": "user", "text": "above 45 °C",
                         "clarify": True}  # fmt: skip


@pytest.mark.parametrize("bad", ["yesterday", "2022-13-01T00:00", 20220602])
def test_a_reference_time_that_is_no_time_is_a_400_saying_so(tmp_path: Path, bad: Any) -> None:
    client, recorder = _client(tmp_path)
    r = client.post("/api/ask", json={"text": "power of node 5", "as_of": bad})
    assert r.status_code == 400 and "as_of" in r.json()["error"]
    assert recorder.as_of == []
    assert "href='/c/" not in client.get("/").text  # refused before a conversation was made


def test_the_page_shows_the_lakes_range_and_the_reference_default(tmp_path: Path) -> None:
    client, _ = _client(tmp_path, from_months(["22-05", "22-06"]))
    page = client.get("/").text
    assert "The lake covers <strong>May – June 2022</strong>" in page
    state = json.loads(page.split("<script id='state' type='application/json'>")[1].split("<")[0])
    assert state["reference"] == "2022-06-15T00:00:00+00:00"
    assert state["coverage"] == {"first": "2022-05-01", "last": "2022-06-30",
                                 "text": "May – June 2022"}  # fmt: skip
    for control in ("<label for='as-of'>", "<label for='question'", "id='start-over'"):
        assert control in page, control


def test_the_lakes_range_is_read_from_its_month_folders() -> None:
    assert from_months([]) is None and from_months(["tmp", "2022-06"]) is None
    june = from_months(["22-06"])
    assert june == Coverage(date(2022, 6, 1), date(2022, 6, 30)) and june.text() == "June 2022"
    gap = from_months(["21-12", "22-03", "22-02"])
    assert gap == Coverage(date(2021, 12, 1), date(2022, 3, 31), gaps=True)
    assert gap.text() == "December 2021 – March 2022 (with gaps)"
    assert from_months(["24-02"]) == Coverage(date(2024, 2, 1), date(2024, 2, 29))


def test_the_ui_reads_the_range_of_the_lake_it_serves(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    for month in ("22-05", "22-06"):
        (lake / f"year_month={month}" / "plugin=ipmi_pub").mkdir(parents=True)
    found = lake_coverage(load_settings(data_dir=tmp_path, lake=str(lake)))
    assert found == Coverage(date(2022, 5, 1), date(2022, 6, 30))
    absent = load_settings(data_dir=tmp_path, lake=str(tmp_path / "absent"))
    assert lake_coverage(absent) is None  # no range shown; the UI still starts


def test_an_answer_on_the_page_points_to_no_command_line() -> None:
    said = ("no data for ipmi/pcie in 2022-03-01 14:00–2022-03-01 15:00 UTC (the lake holds "
            "months 22-05..22-06: `oda-analyst lake describe`)")  # fmt: skip
    assert without_commands(said).endswith("(the lake holds months 22-05..22-06)")
    assert without_commands("name a metric; `oda-analyst metrics` lists them") == "name a metric"
    shown = view({"status": "completed", "answer": said, "warnings": [said]})
    assert "oda-analyst" not in shown["brief"] + shown["summary"] + shown["warnings"][0]


def test_a_site_sets_the_reference_times_default() -> None:
    june = from_months(["22-05", "22-06"])
    assert reference_time(None, june) is None and reference_time("now", june) is None
    assert reference_time("lake-end", june) == datetime(2022, 7, 1, tzinfo=UTC)
    assert reference_time("lake-end", None) is None  # no lake listed: now
    assert reference_time("2022-06-02T00:00", june) == datetime(2022, 6, 2, tzinfo=UTC)
    assert reference_time("2022-06-02T02:00+02:00", None) == datetime(2022, 6, 2, tzinfo=UTC)
    with pytest.raises(ConfigError, match="lake-end"):
        reference_time("yesterday", june)


def test_a_clarification_says_what_it_asks_about() -> None:
    """The page's box shows an example reply of that kind ('e.g. above 30 °C' for a threshold)."""
    asked = {"field": "threshold", "question": "What counts as 'hot' here?", "candidates": []}
    shown = view({"status": "clarification", "answer": asked["question"], "clarification": asked})
    assert shown["clarification"] == {"field": "threshold", "question": asked["question"],
                                      "candidates": []}  # fmt: skip
