"""Password sign-in: users and their argon2 hashes, from a file or the environment.

A credentials source is lines of ``user:<argon2 hash>`` (``oda-analyst ui-hash-password`` makes
the hash); the environment form separates entries with spaces (an argon2 hash holds commas).
Plain passwords are never stored or compared: a user who is not listed and a wrong password both
fail the same way, so sign-in does not tell which user names exist.
"""

from __future__ import annotations

import re
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from oda_analyst.errors import ConfigError

_HASHER = PasswordHasher()
_USER = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
# A verification against this keeps a missing user as slow as a wrong password.
_DUMMY = _HASHER.hash("not a password of anyone")


def hash_password(password: str) -> str:
    """The argon2id hash of a password, for a credentials file."""
    return _HASHER.hash(password)


def parse_credentials(text: str, *, source: str) -> dict[str, str]:
    """``user:hash`` entries (one per line or space-separated; ``#`` starts a comment line)
    → {user: hash}."""
    users: dict[str, str] = {}
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    for entry in " ".join(lines).split():
        user, sep, hashed = entry.partition(":")
        if not sep or not _USER.match(user) or not hashed.startswith("$argon2"):
            raise ConfigError(
                f"{source}: entry {entry[:24]!r}… is not 'user:<argon2 hash>'",
                hint="make the hash with `oda-analyst ui-hash-password`",
            )
        users[user] = hashed
    return users


def load_credentials(file: Path | None, env_value: str | None) -> dict[str, str]:
    """The users who may sign in: the file's entries, then the environment's."""
    users: dict[str, str] = {}
    if file is not None:
        if not file.is_file():
            raise ConfigError(
                f"credentials file {file} does not exist",
                hint="set ODA_UI_USERS_FILE to a file of 'user:<argon2 hash>' lines",
            )
        users.update(parse_credentials(file.read_text(encoding="utf-8"), source=str(file)))
    if env_value:
        users.update(parse_credentials(env_value, source="ODA_UI_USERS"))
    if not users:
        raise ConfigError(
            "no user may sign in to the web UI",
            hint="set ODA_UI_USERS_FILE or ODA_UI_USERS to 'user:<argon2 hash>' entries",
        )
    return users


def verify(users: dict[str, str], user: str, password: str) -> bool:
    """Whether ``password`` is ``user``'s (constant work whether or not the user exists)."""
    hashed = users.get(user)
    try:
        return _HASHER.verify(hashed or _DUMMY, password) and hashed is not None
    except (VerificationError, InvalidHashError):
        return False
