"""One ``/metrics`` for every member of a shared listener (docs/listener.md, "Shared listener (process)").

Each member keeps its own :class:`~arc_scaleset.listener.metrics.ListenerMetrics` on a registry of its own,
exactly as a listener of one scale set (so a member's metrics config, label lists and buckets are its own, and a
stopped member's series vanish with its registry). :class:`MemberMetrics` is the one collector the process
serves: it merges the members' families by name, so each metric has one ``# HELP``/``# TYPE`` header whatever
the number of members.

A series must stay one scale set's. The scale-set gauges already carry ARC's ``name`` and ``namespace`` labels;
the job metrics and ``gha_listener_skipped_messages_total`` do not (in ARC each listener is its own scrape
target, which tells them apart), so :func:`merge_families` adds the member's ``name`` and ``namespace`` (ARC's
label names, the EphemeralRunnerSet's values) to every sample that lacks them. Two members' series can then never
collide, even when both serve the same repository's jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample


@dataclass(frozen=True, slots=True)
class MemberSeries:
    """One member's families and the scale-set labels that tell its series apart."""

    name: str
    namespace: str
    families: Iterable[Metric]


def merge_families(members: Iterable[MemberSeries]) -> list[Metric]:
    """The members' families merged by metric name, in order of first appearance, each sample labelled with its
    member's ``name``/``namespace`` where it has none of its own (a label the metric config set is kept)."""
    merged: dict[str, Metric] = {}
    for member in members:
        identity = {"name": member.name, "namespace": member.namespace}
        for family in member.families:
            target = merged.get(family.name)
            if target is None:
                target = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            target.samples.extend(_labelled(sample, identity) for sample in family.samples)
    return list(merged.values())


def _labelled(sample: Sample, identity: Mapping[str, str]) -> Sample:
    # An empty value is as good as none: a metrics config may list ``name`` on a job metric, which ARC fills with "".
    missing = {key: value for key, value in identity.items() if not sample.labels.get(key)}
    if not missing:
        return sample
    return sample._replace(labels={**sample.labels, **missing})


class MemberMetrics(Collector):
    """The collector a shared listener serves: the merged families of its current members' registries.

    :meth:`add` and :meth:`remove` are called as members start and stop; a scrape sees the members of that
    moment (all calls happen on the process's one event loop, so no scrape sees half a change).
    """

    def __init__(self) -> None:
        self._members: dict[str, tuple[str, str, CollectorRegistry]] = {}

    def add(self, member: str, *, name: str, namespace: str, registry: CollectorRegistry) -> None:
        """Serve ``registry`` as ``member``'s (replacing the one it had): ``name``/``namespace`` are its
        EphemeralRunnerSet's."""
        self._members[member] = (name, namespace, registry)

    def remove(self, member: str) -> None:
        self._members.pop(member, None)

    def collect(self) -> Iterator[Metric]:
        members = [
            MemberSeries(name=name, namespace=namespace, families=list(registry.collect()))
            for name, namespace, registry in self._members.values()
        ]
        yield from merge_families(members)
