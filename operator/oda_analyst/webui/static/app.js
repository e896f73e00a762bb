// The chat page: draws messages from JSON and streams an answer from POST /api/ask.
"use strict";
const state = JSON.parse(document.getElementById("state").textContent);
const box = document.getElementById("messages");
const PAGE = 20;

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
    const head = el("tr", {}, ...columns.map((c) => el("th", {}, c)));
    const body = rows.slice(page * PAGE, (page + 1) * PAGE)
      .map((r) => el("tr", {}, ...r.map((v) => el("td", {}, v == null ? "" : String(v)))));
    wrap.append(el("table", {}, el("thead", {}, head), el("tbody", {}, ...body)));
    if (pages > 1) {
      wrap.append(el("div", { class: "pager" },
        el("button", { type: "button", onclick: () => { if (page > 0) { page--; draw(); } } }, "‹"),
        `page ${page + 1} of ${pages} · ${total ?? rows.length} rows`,
        el("button", { type: "button", onclick: () => { if (page < pages - 1) { page++; draw(); } } }, "›")));
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
    const c = el("div", { class: "candidates" });
    for (const [label, value] of m.clarification.candidates || []) {
      c.append(el("button", { type: "button", class: "candidate", onclick: () => {
        c.querySelectorAll("button").forEach((x) => { x.disabled = true; });
        send(value, true);
      } }, label));
    }
    b.append(c);
  }
  (m.artifacts || []).forEach((a, i) => {
    const url = `/artifacts/${m.id}/${a.index}`;
    if ((a.media_type || "").startsWith("image/")) {
      b.append(el("figure", {}, el("img", { src: url, alt: a.title, class: "plot" }),
        el("figcaption", {}, el("a", { href: url + "?download=1", class: "download", title: a.title }, "Download the chart (PNG)"))));
      const code = (m.scripts || [])[i];
      if (code) b.append(el("details", { class: "code" }, el("summary", {}, "Code that ran"), el("pre", {}, code)));
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
  if (m.sparql) b.append(el("details", { class: "sparql" }, el("summary", {}, "SPARQL"), el("pre", {}, m.sparql)));
  if (m.plan) b.append(el("details", { class: "provenance" }, el("summary", {}, "Provenance"),
    el("pre", {}, JSON.stringify({ plan: m.plan, tasks: m.tasks, request_id: m.request_id,
      retrieval_request_id: m.retrieval_request_id }, null, 2))));
  if (m.id && m.status !== "clarification") b.append(feedback(m));
  return b;
}

function feedback(m) {
  const note = el("input", { type: "text", placeholder: "What was right or wrong? (optional)", class: "comment" });
  const done = el("span", { class: "sent" });
  const f = el("div", { class: "feedback" });
  const rate = (score, btn) => async () => {
    const r = await fetch("/api/feedback", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ message_id: m.id, score, comment: note.value }) });
    f.querySelectorAll("button").forEach((x) => x.classList.remove("chosen"));
    if (r.ok) { btn().classList.add("chosen"); done.textContent = " thanks, recorded"; }
    else done.textContent = ` not recorded: ${await errorText(r)}`;
  };
  const up = el("button", { type: "button", class: "up", title: "Good answer", onclick: rate("up", () => up) }, "▲ Right");
  const down = el("button", { type: "button", class: "down", title: "Wrong answer", onclick: rate("down", () => down) }, "▼ Wrong");
  f.append(up, down, note, done);
  return f;
}

function add(m) {
  box.querySelector(".empty")?.remove();
  const row = el("div", { class: `msg ${m.role}` });
  row.append(m.role === "user" ? el("div", { class: "bubble" }, m.text) : assistant(m));
  box.append(row);
  row.scrollIntoView({ block: "end" });
  return row;
}

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

async function send(text, clarify) {
  add({ role: "user", text });
  const live = el("div", { class: "msg assistant pending" });
  const steps = el("ul", { class: "steps" });
  live.append(el("div", { class: "bubble" }, el("div", { class: "status" }, "working"), steps));
  box.append(live);
  try {
    await stream(text, clarify, live, steps);
  } catch (e) {
    failed(live, `The answer could not be read: ${e.message || e}`);
  }
}

async function stream(text, clarify, live, steps) {
  const r = await fetch("/api/ask", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ text, conversation_id: state.conversation_id, clarify: !!clarify }) });
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
        list.prepend(el("li", { class: "current" }, el("a", { href: `/c/${ev.id}` }, text)));
      } else if (ev.type === "progress") {
        steps.querySelectorAll("li").forEach((li) => li.classList.remove("running"));
        steps.append(el("li", { class: "running" }, ev.text));
      } else if (ev.type === "answer") {
        answered = true;
        live.remove();
        add(ev.message);
      }
    }
  }
  if (!answered) failed(live, "The answer stream ended without an answer.");
}

for (const m of state.messages) add(m);
document.getElementById("ask").onsubmit = (e) => {
  e.preventDefault();
  const q = document.getElementById("question");
  const text = q.value.trim();
  if (text) { q.value = ""; send(text, false); }
};
