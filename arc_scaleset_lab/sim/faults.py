"""Fault injection for the protocol routes: fail, slow down, hang or drop requests, deterministically.

A :class:`FaultRule` matches requests by route name (an ``fnmatch`` pattern; ``*`` = every protocol route,
never the ``/_sim`` admin API) and optionally by method. The first matching rule with budget left applies:

- ``latency``: the request waits this long (on the sim's clock) before anything else - a slow service, or a
  hang longer than the client's timeout;
- ``drop_connection``: the connection is closed without a response;
- ``status``: the request is answered with this status and an error body in the route's dialect
  (``Retry-After`` added when ``retry_after`` is set, e.g. for 429/503);
- latency alone delays the real answer.

``count`` limits how many requests a rule affects (None = until removed); ``probability`` < 1 applies it to
a random share of matching requests, drawn from an RNG seeded at construction, so a run is reproducible.

Route names: registration_token, app_access_token, runner_registration (GitHub side); get_scale_sets,
get_scale_set, create_scale_set, update_scale_set, delete_scale_set, get_runner_groups, generate_jit_config,
get_runner, get_runners, remove_runner, create_session, refresh_session, delete_session, get_message,
delete_message, acquire_jobs, acquirable_jobs (Actions side).
"""

from __future__ import annotations

import fnmatch
import itertools
import random
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class FaultRule:
    route: str = "*"
    method: str | None = None
    status: int | None = None
    count: int | None = 1
    retry_after: float | None = None
    latency: float = 0.0
    drop_connection: bool = False
    probability: float = 1.0
    type_name: str | None = None  # Actions-side error typeName; default by status
    message: str = "injected fault"

    def matches(self, route: str, method: str) -> bool:
        return fnmatch.fnmatchcase(route, self.route) and (self.method is None or self.method.upper() == method)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultRule:
        names = {
            "route": "route",
            "method": "method",
            "status": "status",
            "count": "count",
            "retryAfter": "retry_after",
            "latency": "latency",
            "dropConnection": "drop_connection",
            "probability": "probability",
            "typeName": "type_name",
            "message": "message",
        }
        unknown = set(data) - set(names)
        if unknown:
            raise ValueError(f"unknown fault fields: {sorted(unknown)}")
        return cls(**{names[k]: v for k, v in data.items()})

    def to_json(self) -> dict[str, Any]:
        raw = asdict(self)
        return {
            "route": raw["route"],
            "method": raw["method"],
            "status": raw["status"],
            "count": raw["count"],
            "retryAfter": raw["retry_after"],
            "latency": raw["latency"],
            "dropConnection": raw["drop_connection"],
            "probability": raw["probability"],
            "typeName": raw["type_name"],
            "message": raw["message"],
        }


@dataclass
class _Active:
    id: int
    rule: FaultRule
    remaining: int | None
    hits: int = 0


@dataclass
class FaultInjector:
    """The active rules. ``take(route, method)`` consumes one use of the first rule that fires."""

    seed: int = 0
    _rules: list[_Active] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def add(self, rule: FaultRule) -> int:
        if rule.status is None and not rule.latency and not rule.drop_connection:
            raise ValueError("a fault needs a status, a latency or drop_connection")
        active = _Active(next(self._ids), rule, rule.count)
        self._rules.append(active)
        return active.id

    def remove(self, rule_id: int) -> bool:
        before = len(self._rules)
        self._rules = [r for r in self._rules if r.id != rule_id]
        return len(self._rules) != before

    def clear(self) -> None:
        self._rules.clear()

    def rules(self) -> list[dict[str, Any]]:
        return [{"id": r.id, "remaining": r.remaining, "hits": r.hits, **r.rule.to_json()} for r in self._rules]

    def take(self, route: str, method: str) -> FaultRule | None:
        for active in self._rules:
            if not active.rule.matches(route, method):
                continue
            if active.rule.probability < 1.0 and self._rng.random() >= active.rule.probability:
                continue
            active.hits += 1
            if active.remaining is not None:
                active.remaining -= 1
                if active.remaining <= 0:
                    self._rules.remove(active)
            return replace(active.rule)
        return None
