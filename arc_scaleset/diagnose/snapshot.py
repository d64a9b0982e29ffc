"""One scale set's objects, read together: the input of ``status`` and ``explain`` (docs/observability.md).

A :class:`Snapshot` holds, as the API returned them, the AutoscalingRunnerSet, its EphemeralRunnerSets, their
EphemeralRunners and runner pods, the AutoscalingListener and its pod, and the Events about any of them
(normalised to :class:`EventRecord`, whether they came from ``events.k8s.io/v1`` or core ``v1``). It is plain
JSON data with the time it was taken, so the rules are pure functions of it and a recorded snapshot
(:meth:`Snapshot.to_json`, :meth:`Snapshot.from_json`) is a unit-test fixture.

:func:`gather` reads them with one list per kind and namespace, whatever the number of scale sets. What the
caller may not read (an AutoscalingListener outside its namespaces, Events) is left out and said in
``Snapshot.notes``; only the AutoscalingRunnerSets themselves must be readable. Secrets are never read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_group import LABEL_GROUP, group_object_name
from arc_scaleset.api.listener_standby import wants_standby
from arc_scaleset.api.listener_state import ListenerState
from arc_scaleset.api.runner_sets import sort_runner_sets
from arc_scaleset.api.views import EphemeralRunnerSetView
from arc_scaleset.diagnose.listener_of import listener_of
from arc_scaleset.diagnose.standby import ListenerPods, listener_pods
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.conditions import format_time
from arc_scaleset.kube.errors import Forbidden, KubeError, NotFound
from arc_scaleset.kube.ownerrefs import is_controlled_by
from arc_scaleset.kube.resources import CORE_EVENTS, EVENTS, LEASES, PODS, Resource
from arc_scaleset.kube.views import ObjectView, integer, mapping, parse_timestamp, string

JsonObject = dict[str, Any]
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class EventRecord:
    """One Event about an object of the set, in the terms of both Event APIs.

    ``time`` is when it was last seen (``series.lastObservedTime``, ``eventTime``, ``lastTimestamp``...);
    ``count`` how often (1 for a single event).
    """

    kind: str
    namespace: str
    name: str
    type: str
    reason: str
    note: str
    time: dt.datetime | None
    count: int = 1

    def to_json(self) -> JsonObject:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "type": self.type,
            "reason": self.reason,
            "note": self.note,
            "time": format_time(self.time) if self.time else None,
            "count": self.count,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EventRecord:
        return cls(
            kind=string(data.get("kind")),
            namespace=string(data.get("namespace")),
            name=string(data.get("name")),
            type=string(data.get("type")),
            reason=string(data.get("reason")),
            note=string(data.get("note")),
            time=parse_timestamp(data.get("time")),
            count=integer(data.get("count")) or 1,
        )

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> EventRecord:
        """From an ``events.k8s.io/v1`` Event or a core ``v1`` Event (``regarding``/``involvedObject``,
        ``note``/``message``, ``series``/``count``)."""
        regarding = mapping(event.get("regarding")) or mapping(event.get("involvedObject"))
        series = mapping(event.get("series"))
        time = (
            parse_timestamp(series.get("lastObservedTime"))
            or parse_timestamp(event.get("deprecatedLastTimestamp"))
            or parse_timestamp(event.get("lastTimestamp"))
            or parse_timestamp(event.get("eventTime"))
            or parse_timestamp(event.get("firstTimestamp"))
            or ObjectView(event).creation_timestamp
        )
        count = (
            integer(series.get("count")) or integer(event.get("deprecatedCount")) or integer(event.get("count")) or 1
        )
        return cls(
            kind=string(regarding.get("kind")),
            namespace=string(regarding.get("namespace")),
            name=string(regarding.get("name")),
            type=string(event.get("type")),
            reason=string(event.get("reason")),
            note=string(event.get("note")) or string(event.get("message")),
            time=time,
            count=count,
        )


@dataclass
class Snapshot:
    """One scale set's objects as read at ``taken_at`` (see the module docstring)."""

    taken_at: dt.datetime
    scale_set: JsonObject
    runner_sets: list[JsonObject] = field(default_factory=list)
    runners: list[JsonObject] = field(default_factory=list)
    runner_pods: list[JsonObject] = field(default_factory=list)
    listener: JsonObject | None = None
    listener_pod: JsonObject | None = None
    """The listener's pod; with a standby, the active one (docs/listener.md, "Standby listener")."""
    standby_pod: JsonObject | None = None
    """With a standby, the other pod of the pair."""
    lease_holder: str = ""
    """With a standby, the pod holding the pair's Lease (``""``: none, or the Lease was not readable)."""
    events: list[EventRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What could not be read, said once (e.g. "AutoscalingListeners: forbidden")."""

    # -- derived reads the summary and the rules share ----------------------------------------------------

    @property
    def namespace(self) -> str:
        return ObjectView(self.scale_set).namespace

    @property
    def name(self) -> str:
        return ObjectView(self.scale_set).name

    @property
    def current_runner_set(self) -> JsonObject | None:
        """The EphemeralRunnerSet the scale set scales now, by the controllers' own rule (api/runner_sets.py);
        when every set is being deleted, the newest of them."""
        sorted_sets = sort_runner_sets(self.runner_sets)
        if sorted_sets.current is not None:
            return cast(JsonObject, sorted_sets.current)
        if not sorted_sets.draining:
            return None
        newest = max(sorted_sets.draining, key=lambda s: ObjectView(s).creation_timestamp or _EPOCH)
        return cast(JsonObject, newest)

    @property
    def listener_state(self) -> ListenerState | None:
        """What the listener last reported about itself (annotation on the current EphemeralRunnerSet)."""
        current = self.current_runner_set
        if current is None:
            return None
        return ListenerState.from_annotation(ObjectView(current).annotation(ANNOTATION_LISTENER_STATE))

    def pod_of(self, runner: Mapping[str, Any]) -> JsonObject | None:
        """The runner's pod (owned by it), or ``None``."""
        uid = ObjectView(runner).uid
        for pod in self.runner_pods:
            if ObjectView(pod).is_owned_by(uid):
                return pod
        return None

    def events_newest_first(self) -> list[EventRecord]:
        oldest = dt.datetime.min.replace(tzinfo=dt.UTC)
        return sorted(self.events, key=lambda e: e.time or oldest, reverse=True)

    # -- recording ------------------------------------------------------------------------------------

    def to_json(self) -> JsonObject:
        return {
            "takenAt": format_time(self.taken_at),
            "scaleSet": self.scale_set,
            "runnerSets": self.runner_sets,
            "runners": self.runners,
            "runnerPods": self.runner_pods,
            "listener": self.listener,
            "listenerPod": self.listener_pod,
            "standbyPod": self.standby_pod,
            "leaseHolder": self.lease_holder,
            "events": [e.to_json() for e in self.events],
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Snapshot:
        taken_at = parse_timestamp(data.get("takenAt"))
        if taken_at is None:
            raise ValueError("a snapshot needs takenAt")
        return cls(
            taken_at=taken_at,
            scale_set=dict(mapping(data.get("scaleSet"))),
            runner_sets=[dict(o) for o in data.get("runnerSets") or []],
            runners=[dict(o) for o in data.get("runners") or []],
            runner_pods=[dict(o) for o in data.get("runnerPods") or []],
            listener=dict(data["listener"]) if data.get("listener") else None,
            listener_pod=dict(data["listenerPod"]) if data.get("listenerPod") else None,
            standby_pod=dict(data["standbyPod"]) if data.get("standbyPod") else None,
            lease_holder=string(data.get("leaseHolder")),
            events=[EventRecord.from_json(e) for e in data.get("events") or []],
            notes=[str(n) for n in data.get("notes") or []],
        )


class _Reader:
    """Lists each (resource, namespace) once; a kind the caller may not read is noted, not fatal."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube
        self._lists: dict[tuple[Resource, str | None], list[JsonObject]] = {}
        self.notes: list[str] = []

    async def objects(self, resource: Resource, namespace: str | None) -> list[JsonObject]:
        key = (resource, namespace)
        if key not in self._lists:
            try:
                self._lists[key] = (await self._kube.list(resource, namespace=namespace)).items
            except (Forbidden, NotFound) as exc:
                where = f"in namespace {namespace}" if namespace else "in any namespace"
                self.notes.append(f"{resource.kind}s {where} not readable: {type(exc).__name__}")
                self._lists[key] = []
        return self._lists[key]

    async def events(self, namespace: str) -> list[EventRecord]:
        """Events in ``namespace``: from ``events.k8s.io/v1``, or core ``v1`` when that API is not served or not
        readable (both show the same stored Events, so only one is read)."""
        try:
            items = (await self._kube.list(EVENTS, namespace=namespace)).items
        except (Forbidden, NotFound):
            items = await self.objects(CORE_EVENTS, namespace)
        return [EventRecord.from_event(e) for e in items]


async def gather(
    kube: KubeClient,
    *,
    namespace: str | None,
    name: str | None = None,
    controller_namespace: str | None = None,
    now: dt.datetime | None = None,
) -> list[Snapshot]:
    """Snapshots of the AutoscalingRunnerSet ``namespace/name``, or of every one in ``namespace`` (every
    namespace when ``namespace`` is None), sorted by namespace and name.

    Listeners are read in ``controller_namespace`` (every namespace when None) and each scale set's is chosen
    by :func:`~.listener_of.listener_of`: only one carrying the scale set's UID annotation counts.

    Raises :class:`LookupError` when ``name`` does not exist, :class:`KubeError` when the scale sets cannot be
    read at all.
    """
    if name is not None:
        if namespace is None:
            raise ValueError("a scale set name needs its namespace")
        try:
            sets = [await kube.get(AUTOSCALING_RUNNER_SETS, name, namespace=namespace)]
        except NotFound:
            raise LookupError(f"AutoscalingRunnerSet {namespace}/{name} not found") from None
    else:
        sets = (await kube.list(AUTOSCALING_RUNNER_SETS, namespace=namespace)).items
    sets.sort(key=lambda s: ObjectView(s).key)
    reader = _Reader(kube)
    # Listeners live in the controller namespace, which the caller may not know: then one cluster-wide list.
    listeners = await reader.objects(AUTOSCALING_LISTENERS, controller_namespace) if sets else []
    snapshots = []
    for ars in sets:
        snapshots.append(await _snapshot_of(reader, ars, listeners, controller_namespace=controller_namespace))
    taken_at = now or dt.datetime.now(dt.UTC)
    for snapshot in snapshots:
        snapshot.taken_at = taken_at
        snapshot.notes = [*reader.notes, *snapshot.notes]
    return snapshots


def serves(pod: Mapping[str, Any], listener: Mapping[str, Any]) -> bool:
    """Whether ``pod`` runs ``listener``: the pod it owns, or, for a member of a shared listener, its group's pod
    (docs/listener.md, "Shared listener")."""
    have, al = ObjectView(pod), ObjectView(listener)
    if have.is_owned_by(al.uid):
        return True
    group = al.labels.get(LABEL_GROUP, "")
    return bool(group) and have.labels.get(LABEL_GROUP) == group and have.name == group_object_name(group)


async def _snapshot_of(
    reader: _Reader, ars: JsonObject, listeners: Sequence[JsonObject], *, controller_namespace: str | None
) -> Snapshot:
    view = ObjectView(ars)
    namespace = view.namespace
    # The scale set's sets by the ownership rule the controller uses (kube/ownerrefs.py), not by UID alone.
    runner_sets = [s for s in await reader.objects(EPHEMERAL_RUNNER_SETS, namespace) if is_controlled_by(s, ars)]
    set_uids = {ObjectView(s).uid for s in runner_sets}
    runners = [
        r
        for r in await reader.objects(EPHEMERAL_RUNNERS, namespace)
        if any(ObjectView(r).is_owned_by(uid) for uid in set_uids)
    ]
    runner_uids = {ObjectView(r).uid for r in runners}
    pods = await reader.objects(PODS, namespace)
    runner_pods = [p for p in pods if any(ObjectView(p).is_owned_by(uid) for uid in runner_uids)]
    choice = listener_of(ars, listeners, controller_namespace=controller_namespace)
    listener = dict(choice.listener) if choice.listener is not None else None
    pods_of_listener = ListenerPods(None)
    if listener is not None:
        al_namespace = ObjectView(listener).namespace
        served = [p for p in await reader.objects(PODS, al_namespace) if serves(p, listener)]
        leases = await reader.objects(LEASES, al_namespace) if wants_standby(ObjectView(listener).annotations) else []
        pods_of_listener = listener_pods(listener, served, leases)
    listener_pod, standby_pod = pods_of_listener.pod, pods_of_listener.standby
    objects = [
        ars,
        *runner_sets,
        *runners,
        *runner_pods,
        *([listener] if listener else []),
        *([listener_pod] if listener_pod else []),
        *([standby_pod] if standby_pod else []),
    ]
    wanted = {(ObjectView(o).kind, ObjectView(o).namespace, ObjectView(o).name) for o in objects}
    for pod in runner_pods + [p for p in (listener_pod, standby_pod) if p]:
        # List items carry the list's kind; a pod listed as a Pod is regarded as one.
        wanted.add(("Pod", ObjectView(pod).namespace, ObjectView(pod).name))
    events: list[EventRecord] = []
    for event_namespace in sorted({n for _, n, _ in wanted}):
        try:
            found = await reader.events(event_namespace)
        except KubeError as exc:
            reader.notes.append(f"Events in namespace {event_namespace} not readable: {type(exc).__name__}")
            continue
        events += [e for e in found if (e.kind, e.namespace or event_namespace, e.name) in wanted]
    return Snapshot(
        taken_at=dt.datetime.now(dt.UTC),
        scale_set=ars,
        runner_sets=runner_sets,
        runners=runners,
        runner_pods=runner_pods,
        listener=listener,
        listener_pod=listener_pod,
        standby_pod=standby_pod,
        lease_holder=pods_of_listener.holder,
        events=events,
        notes=list(choice.notes),
    )


def current_runner_set_view(snapshot: Snapshot) -> EphemeralRunnerSetView | None:
    current = snapshot.current_runner_set
    return EphemeralRunnerSetView(current) if current is not None else None
