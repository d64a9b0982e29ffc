"""Every secret one client was given or minted, and the masking of them out of any text (docs/github.md).

Private to the package. A :class:`Redactor` belongs to one client. It keeps each secret for as long as the
secret can be valid, and no shorter: an error body that echoes a credential (GitHub, a proxy, a load
balancer) must be masked whether the credential was used a second or a day ago. The earlier design kept the
last 64 secrets, so a busy scale set (one JIT config per runner) pushed the PAT out within minutes and an
echoed PAT reached a condition and an Event verbatim.

How long each kind is kept:

- configured credentials (PAT, App private key): for the life of the client;
- minted tokens with a known expiry (App JWT, installation, registration, admin and queue tokens): until
  10 minutes after that expiry (clock skew between us and GitHub);
- minted secrets with no readable expiry: for the life of the client;
- JIT configs: until their runner is removed through this client, else :data:`JIT_CONFIG_RETENTION`.

Masking applies the client's own secrets first (longest first, so a secret that contains another goes
whole), then the process-wide :func:`~arc_scaleset.observability.logging.redact`, so error text carries no
credential-shaped string either.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final

import orjson

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.observability.logging import REDACTED, redact

MIN_SECRET_LENGTH: Final = 6
EXPIRY_GRACE: Final = dt.timedelta(minutes=10)
JIT_CONFIG_RETENTION: Final = dt.timedelta(days=7)
"""How long a JIT config is masked when its runner is not removed through the client that minted it.

An ephemeral runner that never connects is removed by GitHub after a day; one that connects runs one job,
and a self-hosted job runs for at most 5 days. A week covers both."""
_PRUNE_FLOOR: Final = 256


@dataclass(slots=True)
class _Kept:
    forget_after: dt.datetime | None  # None: never
    tag: Hashable | None


class Redactor:
    """The secrets of one client, each kept while it can be valid; calling it masks them out of a text."""

    def __init__(self, *, clock: Clock = REAL_CLOCK) -> None:
        self._clock = clock
        self._kept: dict[str, _Kept] = {}
        self._tags: dict[Hashable, str] = {}
        self._longest_first: list[str] | None = []
        self._prune_at = _PRUNE_FLOOR

    def __len__(self) -> int:
        return len(self._kept)

    def add(self, secret: str, *, expires_at: dt.datetime | None = None, tag: Hashable | None = None) -> None:
        """Mask ``secret`` from now on.

        ``expires_at`` is when the secret stops being valid (it is forgotten :data:`EXPIRY_GRACE` later);
        ``None`` keeps it for the life of the client. Adding a known secret again keeps the later of the two
        deadlines. ``tag`` names it for :meth:`forget`. Values under 6 characters are ignored (they would
        mask ordinary words and cannot be credentials).
        """
        if len(secret) < MIN_SECRET_LENGTH:
            return
        forget_after = None if expires_at is None else expires_at + EXPIRY_GRACE
        known = self._kept.get(secret)
        if known is not None:
            if known.forget_after is not None and (forget_after is None or forget_after > known.forget_after):
                known.forget_after = forget_after
            if tag is not None and known.tag is None:
                known.tag = tag
                self._tags[tag] = secret
            return
        self._kept[secret] = _Kept(forget_after, tag)
        if tag is not None:
            self._tags[tag] = secret
        self._longest_first = None
        if len(self._kept) >= self._prune_at:
            self._prune()

    def forget(self, tag: Hashable) -> None:
        """Stop masking the secret added with ``tag`` (e.g. the JIT config of a removed runner).

        A secret kept for the life of the client (no expiry) is never forgotten this way.
        """
        secret = self._tags.pop(tag, None)
        if secret is None:
            return
        kept = self._kept.get(secret)
        if kept is not None and kept.forget_after is not None:
            del self._kept[secret]
            self._longest_first = None

    def __call__(self, text: str) -> str:
        """``text`` with every secret of this client, and every credential-shaped string, masked."""
        if self._longest_first is None:
            self._longest_first = sorted(self._kept, key=len, reverse=True)
        for secret in self._longest_first:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return redact(text)

    def _prune(self) -> None:
        # Amortised: a prune runs when the set has doubled since the last one, so adding stays O(1).
        now = self._clock.now()
        gone = [s for s, kept in self._kept.items() if kept.forget_after is not None and kept.forget_after <= now]
        for secret in gone:
            kept = self._kept.pop(secret)
            if kept.tag is not None and self._tags.get(kept.tag) == secret:
                del self._tags[kept.tag]
        if gone:
            self._longest_first = None
        self._prune_at = max(_PRUNE_FLOOR, 2 * len(self._kept))


def jwt_expiry(token: str) -> dt.datetime | None:
    """The ``exp`` claim of a JWT, read without verifying the signature; ``None`` when there is none (or the
    token is not a JWT: three base64url segments, the second a JSON object).

    Decoded by hand rather than with PyJWT: the payload is plain base64url JSON, and importing PyJWT (which
    imports cryptography) would add about 10 MB to every process, token users and listeners included.
    """
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1]
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return dt.datetime.fromtimestamp(int(claims["exp"]), tz=dt.UTC)
    except (binascii.Error, orjson.JSONDecodeError, KeyError, TypeError, ValueError, OverflowError):
        return None
