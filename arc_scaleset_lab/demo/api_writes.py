"""Counting Kubernetes API writes: from the API server's own ``apiserver_request_total`` and from the
controller's ``rest_client_requests_total``.

The API server counts every client. What the demo reports as "the system's writes" leaves out what a real
cluster's kubelets and scheduler would write anyway (pod status, bindings), node and Lease heartbeats, and
Events: those are not the operator's work, and the lease renewals grow with time, not with runners.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE"})
_SERIES = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')

# (resource, subresource) pairs written by the kubelet/scheduler roles, heartbeats, and events.
_NOT_THE_OPERATORS = frozenset(
    {
        ("pods", "status"),
        ("pods", "binding"),
        ("nodes", ""),
        ("nodes", "status"),
        ("leases", ""),
        ("events", ""),
    }
)


@dataclass(frozen=True)
class WriteKey:
    group: str
    resource: str
    subresource: str
    verb: str

    @property
    def counted(self) -> bool:
        """Whether this write is the operator's (controller and listener) work, see the module docstring."""
        return (self.resource, self.subresource) not in _NOT_THE_OPERATORS and self.resource != ""


def series(text: str, metric: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of ``metric`` in a Prometheus text exposition: (labels, value)."""
    found: list[tuple[dict[str, str], float]] = []
    prefix = metric + "{"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        match = _SERIES.match(line)
        if match is None or match.group("name") != metric:
            continue
        labels = {m.group("key"): m.group("value") for m in _LABEL.finditer(match.group("labels"))}
        try:
            found.append((labels, float(match.group("value"))))
        except ValueError:
            continue
    return found


def apiserver_writes(text: str) -> Counter[WriteKey]:
    """Write requests by (group, resource, subresource, verb), from an API server's ``/metrics``."""
    counts: Counter[WriteKey] = Counter()
    for labels, value in series(text, "apiserver_request_total"):
        verb = labels.get("verb", "").upper()
        if verb not in WRITE_VERBS:
            continue
        key = WriteKey(labels.get("group", ""), labels.get("resource", ""), labels.get("subresource", ""), verb)
        counts[key] += int(value)
    return counts


def client_writes(text: str) -> int:
    """Write requests a process made, from its ``rest_client_requests_total`` (client-go's metric)."""
    return int(
        sum(
            value for labels, value in series(text, "rest_client_requests_total") if labels.get("method") in WRITE_VERBS
        )
    )


def operator_writes(before: Mapping[WriteKey, int], after: Mapping[WriteKey, int]) -> Counter[WriteKey]:
    """The operator's writes between two scrapes (see :attr:`WriteKey.counted`)."""
    delta: Counter[WriteKey] = Counter()
    for key, value in after.items():
        if key.counted and value - before.get(key, 0) > 0:
            delta[key] = value - before.get(key, 0)
    return delta


def by_resource(writes: Mapping[WriteKey, int]) -> dict[str, int]:
    """Totals by ``resource[/subresource]``, largest first."""
    totals: Counter[str] = Counter()
    for key, value in writes.items():
        totals[key.resource + (f"/{key.subresource}" if key.subresource else "")] += value
    return dict(totals.most_common())
