"""The web UI: a chat over the coordinator, with sign-in and per-user history."""
