"""The UI's HTML pages (pure). Messages are drawn by ``static/app.js`` from JSON, the same JSON
the answer stream sends, so a reloaded conversation looks exactly like a live one."""

from __future__ import annotations

import json
from datetime import datetime
from html import escape
from typing import Any

from oda_analyst.webui.coverage import Coverage
from oda_analyst.webui.history import Conversation


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><link rel='stylesheet' href='/static/app.css'></head>"
        f"<body>{body}</body></html>"
    )


def _sentence(text: str) -> str:
    """Errors are written in lower case for logs and the CLI; the page shows sentences."""
    return text[:1].upper() + text[1:]


def _token(csrf_token: str) -> str:
    """The form's CSRF token (asgi-csrf compares it with its cookie)."""
    return f"<input type='hidden' name='csrftoken' value='{escape(csrf_token, quote=True)}'>"


def login(
    error: str | None,
    *,
    hint: str | None = None,
    password: bool = True,
    provider: str | None = None,
    csrf_token: str = "",
) -> str:
    """The sign-in page: the password form, a button to the identity provider, or both."""
    err = ""
    if error:
        more = f"<br><span class='hint'>{escape(_sentence(hint))}</span>" if hint else ""
        err = f"<p class='error' role='alert'>{escape(_sentence(error))}{more}</p>"
    sso = (
        f"<p><a class='sso' id='sign-in-oidc' href='/login/oidc'>Sign in with "
        f"{escape(provider)}</a></p>"
        if provider
        else ""
    )
    form = (
        ("<p class='or muted'>or with a password</p>" if provider else "")
        + "<form method='post' action='/login'>"
        + _token(csrf_token)
        + "<label>User <input name='user' autocomplete='username' required autofocus></label>"
        "<label>Password <input name='password' type='password' "
        "autocomplete='current-password' required></label>"
        "<button type='submit'>Sign in</button></form>"
        if password
        else ""
    )
    return _page(
        "Sign in · ODA Analyst",
        "<main class='login'><h1>ODA Analyst</h1><p class='muted'>Data-centre telemetry, "
        f"answered with the query that produced it.</p>{err}{sso}{form}</main>",
    )


def unavailable(message: str, hint: str | None) -> str:
    more = f"<p class='muted'>{escape(_sentence(hint))}</p>" if hint else ""
    return _page(
        "Unavailable · ODA Analyst",
        "<main class='login'><h1>Unavailable</h1>"
        f"<p class='error' role='alert'>{escape(_sentence(message))}</p>{more}"
        "<p><a href='/'>Try again</a></p></main>",
    )


def not_found() -> str:
    return _page(
        "Not found · ODA Analyst",
        "<main class='login'><h1>Not found</h1><p>There is no such conversation for you.</p>"
        "<p><a href='/'>Back to your conversations</a></p></main>",
    )


def _composer(reference: datetime | None, coverage: Coverage | None) -> str:
    """The question box, the reference time and the lake's range: always on screen."""
    lake = (
        f"<span id='lake-range'>The lake covers <strong>{escape(coverage.text())}</strong></span>"
        if coverage
        else ""
    )
    return (
        "<form id='ask' aria-label='Ask the analyst'><div class='context'>"
        f"{lake}<span class='reference'><label for='as-of'>Reference time (UTC)</label> "
        "<input type='datetime-local' id='as-of' step='60' "
        "aria-describedby='reference-help reference-note'> "
        "<button type='button' id='as-of-now' class='quiet'>Now</button></span>"
        "<span id='reference-help' class='muted'>what 'today' and 'yesterday' count from; "
        "empty is now</span></div>"
        "<p id='reference-note' class='reference-note' role='status' hidden></p>"
        "<p id='composer-prompt' class='composer-prompt' hidden></p>"
        "<div class='row'><label for='question' id='question-label' class='visually-hidden'>"
        "Your question</label>"
        "<textarea id='question' rows='2' aria-describedby='keys'></textarea>"
        "<button type='submit' id='send'>Ask</button>"
        "<button type='button' id='start-over' class='quiet' hidden>Start over</button></div>"
        "<p id='keys' class='keys muted'>Enter sends · Shift+Enter starts a new line</p></form>"
    )


def chat(
    user: str,
    conversations: list[Conversation],
    current: Conversation | None,
    messages: list[dict[str, Any]],
    csrf_token: str = "",
    *,
    reference: datetime | None = None,
    coverage: Coverage | None = None,
) -> str:
    """The chat page; ``reference`` is the reference-time control's default (None: now)."""
    items = "".join(
        f"<li{' class=current' if current and c.id == current.id else ''}>"
        f"<a href='/c/{c.id}'{' aria-current=page' if current and c.id == current.id else ''}>"
        f"{escape(c.title)}</a></li>"
        for c in conversations
    )
    state = json.dumps(
        {
            "conversation_id": current.id if current else None,
            "messages": messages,
            "reference": reference.isoformat() if reference else None,
            "coverage": coverage.to_json() if coverage else None,
        },
        default=str,
    ).replace("</", "<\\/")
    return _page(
        (current.title if current else "New conversation") + " · ODA Analyst",
        "<aside><h1 class='brand'>ODA Analyst</h1>"
        "<a class='new' href='/'>+ New conversation</a>"
        f"<nav aria-label='Conversations'><ul class='conversations'>{items}</ul></nav>"
        f"<form method='post' action='/logout' class='who'>{_token(csrf_token)}"
        f"<span>{escape(user)}</span>"
        "<button type='submit' id='sign-out'>Sign out</button></form></aside>"
        "<main class='chat'><div id='messages' role='log' aria-label='Conversation' tabindex='0'>"
        + (
            ""
            if messages
            else "<div class='empty'><h2>Ask about the data centre</h2><p>In plain language: "
            "power, temperatures, GPU utilisation or jobs of nodes and racks over a time range. "
            "Each answer shows what it was understood as, its figures and plot, and the SPARQL "
            "that produced them.</p></div>"
        )
        + "</div>"
        + _composer(reference, coverage)
        + "</main>"
        f"<script id='state' type='application/json'>{state}</script>"
        "<script src='/static/app.js'></script>",
    )
