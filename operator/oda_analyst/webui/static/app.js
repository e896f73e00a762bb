// The chat page: draws messages from JSON and streams an answer from POST /api/ask.
"use strict";
const state = JSON.parse(document.getElementById("state").textContent);
const box = document.getElementById("messages");
const form = document.getElementById("ask");
const question = document.getElementById("question");
const questionLabel = document.getElementById("question-label");
const sendButton = document.getElementById("send");
const startOverButton = document.getElementById("start-over");
const promptLine = document.getElementById("composer-prompt");
const asOf = document.getElementById("as-of");
const referenceNote = document.getElementById("reference-note");
const PAGE = 20;
const DAY_MS = 86400000;
// What a typed reply looks like, by what the clarification asks about.
const EXAMPLES = { threshold: "e.g. above 30 °C", time: "e.g. 1 June 2022 08:00-10:00",
  metric: "e.g. inlet temperature", entity: "e.g. node 900, or rack 12", analysis: "e.g. line" };
// The clarification waiting for a reply ({row, question}): while there is one it owns the box.
let pending = null;
let busy = false;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else if (k.startsWith("on")) node[k] = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
}

function table(columns, rows, total) {
  const wrap = el("div", { class: "table" });
  let page = 0;
  const pages = Math.max(1, Math.ceil(rows.length / PAGE));
  function draw() {
    wrap.replaceChildren();
    const head = el("tr", {}, ...columns.map((c) => el("th", { scope: "col" }, c)));
    const body = rows.slice(page * PAGE, (page + 1) * PAGE)
      .map((r) => el("tr", {}, ...r.map((v) => el("td", {}, v == null ? "" : String(v)))));
    wrap.append(el("table", {}, el("thead", {}, head), el("tbody", {}, ...body)));
    if (pages > 1) {
      wrap.append(el("div", { class: "pager" },
        el("button", { type: "button", "aria-label": "Previous page", onclick: () => { if (page > 0) { page--; draw(); } } }, "‹"),
        `page ${page + 1} of ${pages} · ${total ?? rows.length} rows`,
        el("button", { type: "button", "aria-label": "Next page", onclick: () => { if (page < pages - 1) { page++; draw(); } } }, "›")));
    }
  }
  draw();
  return wrap;
}

function assistant(m) {
  const b = el("div", { class: "bubble", "data-request-id": m.request_id || "" });
  b.append(el("div", { class: `status ${m.status}` }, m.status || ""));
  if (m.understood_as) b.append(el("div", { class: "understood" }, "Understood as: " + m.understood_as));
  if (m.steps && m.steps.length) {
    b.append(el("details", { class: "steps-done" }, el("summary", {}, `${m.steps.length} steps`),
      el("ul", { class: "steps" }, ...m.steps.map((s) => el("li", {}, s)))));
  }
  b.append(el("div", { class: "summary" }, m.brief || m.summary || ""));
  for (const w of m.warnings || []) b.append(el("div", { class: "warn" }, "⚠ " + w));
  if (m.clarification) {
    const c = el("div", { class: "candidates", role: "group", "aria-label": "Possible answers" });
    for (const [label, value] of m.clarification.candidates || []) {
      c.append(el("button", { type: "button", class: "candidate", onclick: () => send(value, true) }, label));
    }
    b.append(c, el("div", { class: "resolution", role: "status" }));
  }
  (m.artifacts || []).forEach((a, i) => {
    const url = `/artifacts/${m.id}/${a.index}`;
    if ((a.media_type || "").startsWith("image/")) {
      b.append(el("figure", {}, el("img", { src: url, alt: a.title, class: "plot" }),
        el("figcaption", {}, el("a", { href: url + "?download=1", class: "download", title: a.title }, "Download the chart (PNG)"))));
      const code = (m.scripts || [])[i];
      if (code) b.append(el("details", { class: "code" }, el("summary", {}, "Code that ran"), el("pre", { tabindex: "0" }, code)));
    } else {
      const rows = m.row_count ? `${m.row_count.toLocaleString("en")} rows, ` : "";
      const kind = (a.media_type || "").split("/").pop().toUpperCase() || "file";
      const what = kind === "CSV" ? `Download the data (${rows}CSV)` : `Download ${a.title || "the file"} (${kind})`;
      b.append(el("div", { class: "file" }, el("a", { href: url + "?download=1", class: "download", title: a.title || "" }, what)));
    }
  });
  if (m.columns && m.columns.length && m.rows && m.rows.length) {
    b.append(el("details", { class: "rows" }, el("summary", {}, `Table (${m.row_count ?? m.rows.length} rows)`),
      table(m.columns, m.rows, m.row_count)));
  }
  if (m.sparql) b.append(el("details", { class: "sparql" }, el("summary", {}, "SPARQL"), el("pre", { tabindex: "0" }, m.sparql)));
  if (m.plan) b.append(el("details", { class: "provenance" }, el("summary", {}, "Provenance"),
    el("pre", { tabindex: "0" }, JSON.stringify({ plan: m.plan, tasks: m.tasks, request_id: m.request_id,
      retrieval_request_id: m.retrieval_request_id }, null, 2))));
  if (m.id && m.status !== "clarification") b.append(feedback(m));
  return b;
}

function feedback(m) {
  const note = el("input", { type: "text", placeholder: "What was right or wrong? (optional)", class: "comment",
    "aria-label": "Comment on this answer (optional)" });
  const done = el("span", { class: "sent", role: "status" });
  const f = el("div", { class: "feedback" });
  const rate = (score, btn) => async () => {
    const r = await fetch("/api/feedback", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ message_id: m.id, score, comment: note.value }) });
    f.querySelectorAll("button").forEach((x) => { x.classList.remove("chosen"); x.setAttribute("aria-pressed", "false"); });
    if (r.ok) {
      btn().classList.add("chosen");
      btn().setAttribute("aria-pressed", "true");
      done.textContent = " thanks, recorded";
    } else done.textContent = ` not recorded: ${await errorText(r)}`;
  };
  const up = el("button", { type: "button", class: "up", title: "Good answer", "aria-pressed": "false", onclick: rate("up", () => up) }, "▲ Right");
  const down = el("button", { type: "button", class: "down", title: "Wrong answer", "aria-pressed": "false", onclick: rate("down", () => down) }, "▼ Wrong");
  f.append(up, down, note, done);
  return f;
}

function utcText(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString("en-GB", { timeZone: "UTC", day: "numeric", month: "short", year: "numeric",
    hour: "2-digit", minute: "2-digit" }) + " UTC";
}

function add(m) {
  box.querySelector(".empty")?.remove();
  const row = el("div", { class: `msg ${m.role}` });
  if (m.role === "user") {
    row.append(el("div", { class: "bubble" }, m.text));
    if (m.as_of) row.append(el("div", { class: "asof" }, "reference time " + utcText(m.as_of)));
  } else row.append(assistant(m));
  box.append(row);
  row.scrollIntoView({ block: "end" });
  return row;
}

// --- clarifications: an open one owns the box; an answered or abandoned one is closed ---------

function closeClarification(row, text) {
  row.classList.add("closed");
  row.querySelectorAll("button.candidate").forEach((x) => { x.disabled = true; });
  const said = row.querySelector(".resolution");
  if (said) said.textContent = text;
}

function composer() {
  if (pending) {
    questionLabel.textContent = "Your answer";
    const asked = /[.?!]$/.test(pending.question) ? pending.question : pending.question + ".";
    promptLine.textContent = `The analyst asks: ${asked} Type your answer${pending.buttons ? " or pick one above" : ""}, or start over.`;
    promptLine.hidden = false;
    const example = EXAMPLES[pending.field];
    question.placeholder = example ? `Your answer, ${example}` : "Your answer";
    startOverButton.hidden = false;
  } else {
    questionLabel.textContent = "Your question";
    promptLine.hidden = true;
    question.placeholder = "Ask about power, temperatures, jobs… e.g. GPU-0 utilisation of node 900 on 1 June 2022";
    startOverButton.hidden = true;
  }
  if (!busy) sendButton.textContent = pending ? "Reply" : "Ask";
}

function openClarification(row, m) {
  pending = { row, question: m.brief || m.summary || "", field: m.clarification.field,
    buttons: (m.clarification.candidates || []).length > 0 };
  composer();
}

// The question a clarification asks about: the last one sent as a new question.
function lastQuestion() {
  const asked = [...box.querySelectorAll(".msg.user:not(.reply) .bubble")];
  return asked.length ? asked[asked.length - 1].textContent : "";
}

function startOver() {
  if (!pending || busy) return;
  closeClarification(pending.row, "Closed: started over.");
  pending = null;
  composer();
  question.value = lastQuestion();
  question.focus();
  question.select();
}

// --- the reference time ("now" for relative times) and the lake's range ----------------------

function inputValue(d) { return d.toISOString().slice(0, 16); }

function reference() {
  const d = asOf.value ? new Date(asOf.value + ":00Z") : new Date();
  return Number.isNaN(d.getTime()) ? new Date() : d;
}

// Said at once, before a question is sent: relative times from a reference outside the lake
// ("yesterday", "last week") can only find no data.
function checkReference() {
  const lake = state.coverage;
  if (!lake) return;
  const ref = reference();
  const first = new Date(lake.first + "T00:00:00Z");
  const end = new Date(new Date(lake.last + "T00:00:00Z").getTime() + DAY_MS);
  const when = utcText(ref.toISOString());
  let text = "";
  if (ref.getTime() > end.getTime() + DAY_MS) {
    text = `The reference time (${when}) is after the lake, which covers ${lake.text}: relative times such as "yesterday" or "last week" find no data there. Set a reference time within the lake, or name the dates.`;
  } else if (ref.getTime() <= first.getTime()) {
    text = `The reference time (${when}) is before the lake, which covers ${lake.text}: relative times find no data there. Set a reference time within the lake, or name the dates.`;
  }
  referenceNote.textContent = text;
  referenceNote.hidden = !text;
}

// --- sending ----------------------------------------------------------------------------------

// What a refused request says: the server's JSON "error", else its status (a proxy's page).
async function errorText(r) {
  try {
    const body = await r.json();
    if (body && typeof body.error === "string") return body.error;
  } catch (e) { /* not JSON */ }
  return `The server answered ${r.status} ${r.statusText}`.trim();
}

// The working bubble becomes the error: the page never spins on a request that has failed.
function failed(live, text) {
  live.classList.remove("pending");
  live.replaceChildren(el("div", { class: "bubble error", role: "alert" }, text));
}

// While an answer runs: Ask disabled, the seconds counted on it and in the working bubble.
function working(liveStatus) {
  busy = true;
  const began = Date.now();
  sendButton.disabled = true;
  form.setAttribute("aria-busy", "true");
  box.querySelectorAll("button.candidate").forEach((x) => { x.disabled = true; });
  const tick = () => {
    const s = Math.floor((Date.now() - began) / 1000);
    sendButton.textContent = `Working… ${s} s`;
    liveStatus.textContent = `working · ${s} s`;
  };
  tick();
  const timer = setInterval(tick, 1000);
  return () => {
    clearInterval(timer);
    busy = false;
    sendButton.disabled = false;
    form.removeAttribute("aria-busy");
    box.querySelectorAll(".msg:not(.closed) button.candidate").forEach((x) => { x.disabled = false; });
    composer();
    // A clicked candidate is disabled under the keyboard's focus: give it back to the box.
    if (!document.activeElement || document.activeElement === document.body) question.focus();
  };
}

async function send(text, clarify) {
  if (busy) return;
  if (pending) closeClarification(pending.row, clarify ? `Answered: ${text}` : "Closed: a new question was asked.");
  pending = null;
  composer();
  const asked = { role: "user", text };
  if (!clarify) asked.as_of = reference().toISOString();
  add(asked).classList.toggle("reply", !!clarify);
  const live = el("div", { class: "msg assistant pending" });
  const status = el("div", { class: "status" }, "working");
  const steps = el("ul", { class: "steps" });
  live.append(el("div", { class: "bubble" }, status, steps));
  box.append(live);
  live.scrollIntoView({ block: "end" });
  const done = working(status);
  try {
    await stream(text, clarify, asked.as_of, live, steps);
  } catch (e) {
    failed(live, `The answer could not be read: ${e.message || e}`);
  } finally {
    done();
  }
}

async function stream(text, clarify, asOfIso, live, steps) {
  const body = { text, conversation_id: state.conversation_id, clarify: !!clarify };
  if (asOfIso) body.as_of = asOfIso;
  const r = await fetch("/api/ask", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify(body) });
  if (!r.ok) {
    failed(live, await errorText(r));
    return;
  }
  let answered = false;
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const ev = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (ev.type === "conversation" && !state.conversation_id) {
        state.conversation_id = ev.id;
        history.replaceState(null, "", `/c/${ev.id}`);
        const list = document.querySelector(".conversations");
        list.querySelectorAll("li").forEach((li) => li.classList.remove("current"));
        list.querySelectorAll("a").forEach((a) => a.removeAttribute("aria-current"));
        list.prepend(el("li", { class: "current" }, el("a", { href: `/c/${ev.id}`, "aria-current": "page" }, text)));
      } else if (ev.type === "progress") {
        steps.querySelectorAll("li").forEach((li) => li.classList.remove("running"));
        steps.append(el("li", { class: "running" }, ev.text));
      } else if (ev.type === "answer") {
        answered = true;
        live.remove();
        const row = add(ev.message);
        if (ev.message.status === "clarification" && ev.message.clarification) openClarification(row, ev.message);
      }
    }
  }
  if (!answered) failed(live, "The answer stream ended without an answer.");
}

// --- the page as stored: every clarification but an unanswered last one is closed ------------

state.messages.forEach((m, i) => {
  const row = add(m);
  if (m.role === "user" && m.clarify) row.classList.add("reply");
  if (m.role !== "assistant" || m.status !== "clarification" || !m.clarification) return;
  const next = state.messages[i + 1];
  if (!next) openClarification(row, m);
  else closeClarification(row, next.clarify ? `Answered: ${next.text}` : "Closed: a new question was asked.");
});
composer();
if (state.reference) asOf.value = inputValue(new Date(state.reference));
document.getElementById("as-of-now").onclick = () => { asOf.value = inputValue(new Date()); checkReference(); };
asOf.addEventListener("input", checkReference);
checkReference();
startOverButton.onclick = startOver;
// Enter sends, Shift+Enter breaks the line (not while an input method is composing a word).
question.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    form.requestSubmit();
  }
});
form.onsubmit = (e) => {
  e.preventDefault();
  const text = question.value.trim();
  if (!text || busy) return;
  question.value = "";
  send(text, pending !== null);
};
