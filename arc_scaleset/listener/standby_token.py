"""A standby listener's admin token, kept fresh while it stands by (docs/listener.md, "Standby listener").

The standby fetches its Actions-service admin token while warming up, so that its takeover does not wait for
one. The token lives about an hour, and a standby may wait much longer: its client would then find the token
expired at the takeover and fetch a new one first (the registration token and the admin token, and for a GitHub
App the installation token: two or three calls to GitHub between the takeover and the first poll). So while
standing by it fetches a new one :data:`REFRESH_AHEAD` before the current one expires: more than the client's own
margin (60 s, within which it refreshes before use), so the token a takeover finds is one the client uses as it
is. One exchange per token life (two or three requests an hour), against none before, for a takeover that never
waits for a token.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Final

from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import Clock
from arc_scaleset.github.actions_client import ActionsClient

log = logging.getLogger(__name__)

REFRESH_AHEAD: Final = 75.0
"""Seconds before its expiry that a standby's admin token is replaced: the client's own margin (60 s) and 15 s for
the exchange and a late timer, so that the client never finds the token due while the standby holds it."""
MIN_INTERVAL: Final = 10.0
"""The shortest wait between two refreshes: for a token that lives less than :data:`REFRESH_AHEAD` (the client
then refreshes it before each use anyway), and the first retry after a failed one."""
RETRY_CAP: Final = 300.0
"""The longest wait between two failed refreshes."""


def refresh_in(expires_at: dt.datetime | None, now: dt.datetime) -> float:
    """Seconds until the standby replaces a token expiring at ``expires_at`` (``None``: it has none, the
    warm-up's fetch failed); never less than :data:`MIN_INTERVAL`. Pure."""
    if expires_at is None:
        return MIN_INTERVAL
    return max(MIN_INTERVAL, (expires_at - now).total_seconds() - REFRESH_AHEAD)


async def keep_admin_token_fresh(actions: ActionsClient, clock: Clock, expires_at: dt.datetime | None) -> None:
    """Replace the admin token :data:`REFRESH_AHEAD` before each expiry, starting from one that expires at
    ``expires_at``; until cancelled (the standby takes over, or stops). A failure is logged and retried after
    :data:`MIN_INTERVAL`, doubling to :data:`RETRY_CAP` (each refresh spends a registration token, which GitHub
    rate-limits): the takeover's own call refreshes a token that is due anyway."""
    backoff = Backoff(base=MIN_INTERVAL, cap=RETRY_CAP, jitter=0.2)
    delay = refresh_in(expires_at, clock.now())
    while True:
        await clock.sleep(delay)
        try:
            expires_at = (await actions.refresh_admin_connection()).expires_at
        except Exception as exc:
            delay = backoff.next_delay()
            log.warning(
                "standby listener: could not refresh the admin token ahead",
                extra={"error": type(exc).__name__, "retry_in": round(delay)},
            )
            continue
        backoff.reset()
        delay = refresh_in(expires_at, clock.now())
        log.info("standby listener: admin token refreshed ahead", extra={"expires_at": expires_at.isoformat()})
