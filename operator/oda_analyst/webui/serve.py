"""``oda-analyst ui``: the web UI over the coordinator these settings wire, under uvicorn."""

from __future__ import annotations

import uvicorn

from oda_analyst.analyst import build_coordinator
from oda_analyst.config import Settings
from oda_analyst.webui.app import create_app
from oda_analyst.webui.auth import load_credentials
from oda_analyst.webui.history import History


def serve_ui(settings: Settings, host: str, port: int) -> None:
    users = load_credentials(settings.ui_users_file, settings.ui_users)
    history = History(settings.ui_db or settings.data_dir / "webui" / "history.sqlite")
    in_process = not (settings.retriever_mcp_url and settings.codeagent_mcp_url)
    app = create_app(
        build_coordinator(settings),
        users,
        history,
        secret=settings.ui_secret,
        one_at_a_time=in_process,
    )
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        history.close()
