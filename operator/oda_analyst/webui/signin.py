"""Password sign-in that a flood of guesses can neither win nor use to lock real users out of
the machine (OWASP ASVS 4.0 V2.2.1): rate limits per user and per client address, with back-off,
and a bound on the argon2 work running at once.

The limits are ``limits``' moving windows, in tiers: a user or an address that keeps failing
waits longer and longer (by default 5 tries a minute, then 10 in 15 minutes, then 20 an hour for
a user name, whoever sends them). Every try counts, before the password is checked, so a burst
sent at once is cut at the limit without costing any argon2; a successful sign-in clears the
user's count (not the address's). argon2 runs in threads, at most ``concurrent`` at once (one
per core by default), so guesses never take the threads the answers run in (asyncio's default
pool); beyond ``queue`` waiting, a sign-in is told to retry in a moment rather than waiting behind
the flood.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from limits import RateLimitItem, parse_many
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter


@dataclass(frozen=True)
class SignInLimits:
    per_user: str = "5/minute;10/15 minutes;20/hour"
    per_address: str = "20/minute;100/hour"
    concurrent: int = field(default_factory=lambda: os.cpu_count() or 1)
    queue: int = 16


class BusyError(Exception):
    """Too many sign-ins are being checked at once: retry in a moment."""


class SignInGate:
    def __init__(self, limits: SignInLimits, verify: Callable[[str, str], bool]) -> None:
        self._verify = verify
        self._per_user = parse_many(limits.per_user)
        self._per_address = parse_many(limits.per_address)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._slots = asyncio.Semaphore(max(1, limits.concurrent))
        self._most = max(1, limits.concurrent) + max(0, limits.queue)
        self._inside = 0

    def _keys(self, user: str, address: str) -> list[tuple[RateLimitItem, str, str]]:
        return [(item, "user", user) for item in self._per_user] + [
            (item, "address", address) for item in self._per_address
        ]

    def wait_s(self, user: str, address: str) -> int | None:
        """Seconds to wait before trying again, or None: the try is allowed, and counted.

        Nothing awaits between the test and the hit, so concurrent tries are counted in turn."""
        keys = self._keys(user, address)
        refused = [k for k in keys if not self._limiter.test(*k)]
        if refused:
            now = time.time()
            resets = [self._limiter.get_window_stats(*k).reset_time for k in refused]
            return max(1, math.ceil(max(resets) - now))
        for key in keys:
            self._limiter.hit(*key)
        return None

    def succeeded(self, user: str) -> None:
        for item in self._per_user:
            self._limiter.clear(item, "user", user)

    async def verify(self, user: str, password: str) -> bool:
        """Whether the password is the user's; BusyError when too many are waiting already."""
        if self._inside >= self._most:
            raise BusyError
        self._inside += 1
        try:
            async with self._slots:
                return await asyncio.to_thread(self._verify, user, password)
        finally:
            self._inside -= 1
