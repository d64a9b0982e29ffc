"""What a shared listener does about its config Secret: the pure decisions of group mode (docs/listener.md,
"Shared listener (process)").

The group's config Secret holds one data key per member (the member AutoscalingListener's name) whose value
is that member's ``config.json``. :func:`wanted_members` reads a Secret into ``{member: Wanted}``; the
:attr:`Wanted.digest` is what tells a changed config from an unchanged one, so the running members are
remembered by digest only (never by their credentials). :func:`plan_members` compares the two and says which
members to start, stop and replace; a member whose config did not change is never touched, whatever else the
Secret gained or lost.

:func:`group_liveness` and :func:`group_readiness` are the group's probe verdicts, made of its members'.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Wanted:
    """One member's config as the Secret holds it: the raw ``config.json`` bytes and their sha256."""

    raw: bytes
    digest: str

    def __repr__(self) -> str:  # the raw config holds credentials: never in a repr, a log or a traceback
        return f"Wanted(digest={self.digest[:12]!r})"


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """What to do to go from the running members to the wanted ones; each tuple is sorted by member name.

    ``replace``: running with another config than the Secret's now (stop the old one, then start the new).
    """

    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    replace: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.start or self.stop or self.replace)


def wanted_members(secret: Mapping[str, Any] | None) -> dict[str, Wanted]:
    """The members a config Secret asks for: every data key whose value is base64 (as the API serves ``data``).

    A deleted Secret (``None``) or one without ``data`` asks for none, so every member is stopped. A value that
    is not valid base64 cannot have come from the API server; it is treated as an empty config, which the member
    then reports as unreadable instead of being left out silently.
    """
    data = (secret or {}).get("data") or {}
    wanted: dict[str, Wanted] = {}
    for name, encoded in data.items():
        try:
            raw = base64.b64decode(str(encoded), validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        wanted[str(name)] = Wanted(raw=raw, digest=hashlib.sha256(raw).hexdigest())
    return wanted


def plan_members(wanted: Mapping[str, Wanted], running: Mapping[str, str]) -> GroupPlan:
    """Compare ``wanted`` (from :func:`wanted_members`) with ``running`` (member name -> config digest)."""
    return GroupPlan(
        start=tuple(sorted(name for name in wanted if name not in running)),
        stop=tuple(sorted(name for name in running if name not in wanted)),
        replace=tuple(
            sorted(name for name, digest in running.items() if name in wanted and wanted[name].digest != digest)
        ),
    )


def _changed(wanted: Wanted | None, running_digest: str) -> bool:
    return wanted is not None and wanted.digest != running_digest


@dataclass(frozen=True, slots=True)
class MemberProgress:
    """What the group's liveness reads of one member, in seconds on the monotonic clock: when the member was
    started (its first start: a member that keeps failing and restarting does not look new) and when it last
    polled the message queue successfully (``None``: never)."""

    started: float
    last_poll: float | None


def group_liveness(members: Collection[MemberProgress], *, now: float, window: float) -> tuple[bool, str]:
    """``/healthz`` of a shared listener: alive unless members exist and none of them has made progress (a
    successful poll, or being started) within ``window`` seconds.

    One member that cannot poll (its credentials refused, its scale set gone) must not restart the pod that
    serves the others; a pod in which no member gets anywhere is as stuck as a single listener that cannot poll.
    """
    if not members:
        return True, "no members"
    quiet = [now - (member.last_poll if member.last_poll is not None else member.started) for member in members]
    freshest = min(quiet)
    if freshest <= window:
        return (
            True,
            f"{sum(1 for q in quiet if q <= window)} of {len(quiet)} members made progress within {window:.0f}s",
        )
    return False, f"no member has polled for {freshest:.0f}s (window {window:.0f}s)"


def group_readiness(sessions_held: Collection[bool]) -> tuple[bool, str]:
    """``/readyz`` of a shared listener: ready when it has no members or at least one holds a message session."""
    if not sessions_held:
        return True, "no members"
    held = sum(sessions_held)
    if held:
        return True, f"{held} of {len(sessions_held)} members hold a message session"
    return False, f"none of {len(sessions_held)} members holds a message session"
