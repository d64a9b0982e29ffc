"""The simulated Actions service's in-memory model: tenants, scale sets, runners, sessions, jobs, messages.

Pure logic, no I/O and no asyncio: every operation reads the injected clock, mutates the model, and either
returns a value or raises an :class:`~arc_scaleset_lab.sim.errors.ActionsError`. The HTTP layer and the time
driver (which calls :meth:`SimState.complete_due_jobs`) live elsewhere.

Job lifecycle (one scale set per job, chosen at routing time)::

    QUEUED (no scale set can take it yet) -> AVAILABLE (JobAvailable queued for the scale set's session)
      -> ACQUIRED (acquirejobs: JobAssigned, the job now belongs to the scale set and counts in
         totalAssignedJobs, which is what the listener scales on)
      -> RUNNING (an online idle runner took it: JobStarted)
      -> COMPLETED after ``duration`` seconds, or when its runner exits (JobCompleted with the result)

Routing (docs/capacity.md): a job is offered to one scale set whose labels it matches, in its tenant's reach:
the oldest set whose session has *capacity left* -- the ``X-ScaleSetMaxCapacity`` its last poll advertised,
minus the jobs the set holds and has not finished (offered, acquired, running). Sets with the same labels are
interchangeable, as on the service: a job one set cannot run goes to a sibling instead of waiting. While no
matching set's session has advertised a capacity (no listener polls yet, or a client that sends no header),
the oldest matching set takes it, as before capacity was modelled. Otherwise a job no set has room for stays
QUEUED until a set polls with room or finishes a job.

A job is assigned at most once, to exactly one runner. Statistics are computed from the model on demand, so
they are consistent by construction: ``totalAssignedJobs = acquired + running`` (what the scale set owes
runners for), ``totalRegisteredRunners = busy + idle``.

Messages: job events for a scale set accumulate as items; a queue read packs every pending item into one
``RunnerScaleSetJobMessages`` message (with the statistics at that moment) that stays in the outbox until it
is deleted (acked) or a later read passes ``lastMessageId`` >= its id. A new session gets a fresh
JobAvailable for every job still waiting to be acquired, so a listener restart loses no job, but not the
messages the session before it was delivered and did not acknowledge (they were that session's); a session
refreshed by its ID (a successor resuming it) keeps its queue.
"""

from __future__ import annotations

import base64
import datetime as dt
import enum
import secrets
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from arc_scaleset.clock import Clock
from arc_scaleset_lab.sim import errors

ZERO_TIME = "0001-01-01T00:00:00Z"
DEFAULT_RUNNER_GROUP = "Default"


def rfc3339(moment: dt.datetime | None) -> str:
    """Go's RFC 3339 rendering (``Z`` for UTC); the zero time for "never", as the real service sends it."""
    if moment is None:
        return ZERO_TIME
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class SimConfig:
    """Knobs of the simulated service. Durations are seconds of the injected clock."""

    long_poll_seconds: float = 50.0
    admin_token_ttl: float = 3600.0
    queue_token_ttl: float = 3600.0
    registration_token_ttl: float = 3600.0
    installation_token_ttl: float = 3600.0
    # A session nobody has polled for this long may be taken over by a new one (no 409).
    session_timeout: float = 120.0
    # Ephemeral runners are removed from the service once their job has completed, as on github.com.
    deregister_finished_runners: bool = True
    fault_seed: int = 0
    # Repositories renamed since the config URL was written, "old-owner/old-name" -> "owner/name" (lower case):
    # GitHub's REST API redirects requests for the old name (307; 301 for a GET), and resolves it in a
    # config URL.
    renamed_repositories: dict[str, str] = field(default_factory=dict)


class JobState(enum.StrEnum):
    QUEUED = "queued"
    AVAILABLE = "available"
    ACQUIRED = "acquired"
    RUNNING = "running"
    COMPLETED = "completed"


_HELD_STATES = frozenset({JobState.AVAILABLE, JobState.ACQUIRED, JobState.RUNNING})


@dataclass(frozen=True)
class Statistics:
    total_available_jobs: int = 0
    total_acquired_jobs: int = 0
    total_assigned_jobs: int = 0
    total_running_jobs: int = 0
    total_registered_runners: int = 0
    total_busy_runners: int = 0
    total_idle_runners: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "totalAvailableJobs": self.total_available_jobs,
            "totalAcquiredJobs": self.total_acquired_jobs,
            "totalAssignedJobs": self.total_assigned_jobs,
            "totalRunningJobs": self.total_running_jobs,
            "totalRegisteredRunners": self.total_registered_runners,
            "totalBusyRunners": self.total_busy_runners,
            "totalIdleRunners": self.total_idle_runners,
        }


@dataclass
class Tenant:
    id: int
    scope: str  # normalised config-URL path: "org", "org/repo" or "enterprises/ent" (lower case)

    def covers(self, repository: str) -> bool:
        """Whether a job of ``owner/repo`` may run on this tenant's scale sets."""
        repo = repository.lower()
        if self.scope.startswith("enterprises/"):
            return True
        if "/" in self.scope:
            return repo == self.scope
        return repo.split("/", 1)[0] == self.scope


@dataclass
class RunnerGroup:
    id: int
    name: str
    is_default: bool = False

    def to_json(self, size: int) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "size": size, "isDefaultGroup": self.is_default}


@dataclass
class ScaleSet:
    id: int
    tenant_id: int
    name: str
    runner_group_id: int
    runner_group_name: str
    labels: list[dict[str, str]]
    disable_update: bool
    created_on: dt.datetime

    @property
    def label_names(self) -> frozenset[str]:
        return frozenset(label["name"].lower() for label in self.labels)


@dataclass
class Runner:
    id: int
    name: str
    tenant_id: int
    scale_set_id: int
    registered_at: dt.datetime
    work_folder: str = ""
    online: bool = False
    online_at: dt.datetime | None = None
    job_request_id: int | None = None
    jobs_run: int = 0

    @property
    def busy(self) -> bool:
        return self.job_request_id is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "runnerScaleSetId": self.scale_set_id,
            "status": "online" if self.online else "offline",
            "busy": self.busy,
        }


@dataclass
class Session:
    id: str
    scale_set_id: int
    owner: str
    queue_token: str = field(repr=False)
    queue_token_expires: dt.datetime
    created_at: dt.datetime
    last_seen: dt.datetime
    polls_in_flight: int = 0
    max_capacity: int | None = None


@dataclass
class JobRecord:
    """One workflow job and everything a test may want to assert about it."""

    request_id: int  # runnerRequestId
    job_id: str
    labels: tuple[str, ...]
    repository: str  # owner/repo
    workflow_ref: str
    display_name: str
    event_name: str
    workflow_run_id: int
    duration: float
    result: str  # what the job concludes with when it runs to its end
    state: JobState = JobState.QUEUED
    scale_set_id: int | None = None
    enqueued_at: dt.datetime | None = None
    acquired_at: dt.datetime | None = None  # scaleSetAssignTime
    assigned_at: dt.datetime | None = None  # runnerAssignTime
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    completes_at: dt.datetime | None = None
    runner_name: str | None = None
    runner_id: int | None = None
    run_count: int = 0
    final_result: str | None = None

    @property
    def owner_name(self) -> str:
        return self.repository.split("/", 1)[0]

    @property
    def repository_name(self) -> str:
        return self.repository.split("/", 1)[-1]

    def queue_latency(self) -> float | None:
        """Seconds from enqueue to start, once started."""
        if self.enqueued_at is None or self.started_at is None:
            return None
        return (self.started_at - self.enqueued_at).total_seconds()

    def to_json(self) -> dict[str, Any]:
        return {
            "runnerRequestId": self.request_id,
            "jobId": self.job_id,
            "labels": list(self.labels),
            "repository": self.repository,
            "workflowRef": self.workflow_ref,
            "displayName": self.display_name,
            "eventName": self.event_name,
            "duration": self.duration,
            "state": self.state.value,
            "scaleSetId": self.scale_set_id,
            "enqueuedAt": rfc3339(self.enqueued_at) if self.enqueued_at else None,
            "acquiredAt": rfc3339(self.acquired_at) if self.acquired_at else None,
            "assignedAt": rfc3339(self.assigned_at) if self.assigned_at else None,
            "startedAt": rfc3339(self.started_at) if self.started_at else None,
            "finishedAt": rfc3339(self.finished_at) if self.finished_at else None,
            "runnerName": self.runner_name,
            "runnerId": self.runner_id,
            "runCount": self.run_count,
            "result": self.final_result,
        }


@dataclass
class Message:
    id: int
    items: list[dict[str, Any]]
    statistics: Statistics

    def to_json(self) -> dict[str, Any]:
        # The body is a JSON *string* holding the array of job messages (docs/github.md).
        return {
            "messageId": self.id,
            "messageType": "RunnerScaleSetJobMessages",
            "body": orjson.dumps(self.items).decode(),
            "statistics": self.statistics.to_json(),
        }


@dataclass
class _Queue:
    pending: list[dict[str, Any]] = field(default_factory=list)
    outbox: list[Message] = field(default_factory=list)
    next_message_id: int = 1


@dataclass(frozen=True)
class RunnerExitRequest:
    """The sim asks whoever plays a runner's pod to end it: ``exit_code`` 0 after its job, else a failure."""

    seq: int
    runner_name: str
    exit_code: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "runnerName": self.runner_name, "exitCode": self.exit_code, "reason": self.reason}


class SimState:
    """The whole simulated Actions service. Not thread-safe; one asyncio loop drives it.

    Its dicts are the queries: ``jobs`` (by runnerRequestId), ``runners``, ``scale_sets`` are keyed by ids
    handed out in increasing order and never re-inserted, so they iterate oldest first; ``sessions`` is
    keyed by scale set id.
    """

    def __init__(self, *, clock: Clock, config: SimConfig | None = None) -> None:
        self.clock = clock
        self.config = config or SimConfig()
        self.tenants: dict[int, Tenant] = {}
        self.runner_groups: dict[int, RunnerGroup] = {1: RunnerGroup(1, DEFAULT_RUNNER_GROUP, is_default=True)}
        self.scale_sets: dict[int, ScaleSet] = {}
        self.runners: dict[int, Runner] = {}
        self._runner_ids_by_name: dict[str, set[int]] = {}  # lower-cased name -> ids (names are case-insensitive)
        self.sessions: dict[int, Session] = {}  # by scale set id: one session per scale set
        self.jobs: dict[int, JobRecord] = {}
        self.runner_events: list[RunnerExitRequest] = []
        self.removed_runners: list[Runner] = []
        self._removed_runner_tenants: dict[int, int] = {}  # runner id -> its tenant, once removed
        self.version = 0
        self.on_change: Callable[[], None] | None = None
        self._queues: dict[int, _Queue] = {}
        self._next_ids = {"tenant": 1, "group": 2, "scale_set": 1, "runner": 1, "job": 1000, "run": 5000}

    # ---------------------------------------------------------------- plumbing

    def _id(self, kind: str) -> int:
        value = self._next_ids[kind]
        self._next_ids[kind] = value + 1
        return value

    def _changed(self) -> None:
        self.version += 1
        if self.on_change is not None:
            self.on_change()

    def now(self) -> dt.datetime:
        return self.clock.now()

    # ---------------------------------------------------------------- tenants and groups

    def tenant_for_scope(self, scope: str) -> Tenant:
        """The tenant of a config-URL scope, created on first use (registration)."""
        scope = scope.strip("/").lower()
        for tenant in self.tenants.values():
            if tenant.scope == scope:
                return tenant
        tenant = Tenant(self._id("tenant"), scope)
        self.tenants[tenant.id] = tenant
        self._changed()
        return tenant

    def tenant(self, tenant_id: int) -> Tenant:
        try:
            return self.tenants[tenant_id]
        except KeyError:
            raise errors.ActionsError(404, "System.NotFoundException", f"No tenant {tenant_id}.") from None

    def add_runner_group(self, name: str) -> RunnerGroup:
        for group in self.runner_groups.values():
            if group.name.lower() == name.lower():
                return group
        group = RunnerGroup(self._id("group"), name)
        self.runner_groups[group.id] = group
        self._changed()
        return group

    def runner_groups_named(self, name: str) -> list[RunnerGroup]:
        return [g for g in self.runner_groups.values() if g.name.lower() == name.lower()]

    def runner_group_size(self, group_id: int) -> int:
        return sum(1 for s in self.scale_sets.values() if s.runner_group_id == group_id)

    def _group(self, group_id: int) -> RunnerGroup:
        if group_id == 0:
            return self.runner_groups[1]
        try:
            return self.runner_groups[group_id]
        except KeyError:
            raise errors.runner_group_not_found(group_id) from None

    # ---------------------------------------------------------------- scale sets

    def scale_set(self, tenant_id: int, scale_set_id: int) -> ScaleSet:
        found = self.scale_sets.get(scale_set_id)
        if found is None or found.tenant_id != tenant_id:
            raise errors.scale_set_not_found(scale_set_id)
        return found

    def find_scale_sets(self, tenant_id: int, *, name: str | None, runner_group_id: int | None) -> list[ScaleSet]:
        return [
            s
            for s in self.scale_sets.values()
            if s.tenant_id == tenant_id
            and (name is None or s.name.lower() == name.lower())
            and (runner_group_id is None or s.runner_group_id == runner_group_id)
        ]

    def create_scale_set(
        self,
        tenant_id: int,
        *,
        name: str,
        runner_group_id: int,
        labels: Sequence[dict[str, str]],
        disable_update: bool,
    ) -> ScaleSet:
        self.tenant(tenant_id)
        if not name:
            raise errors.bad_request("The runner scale set name is required.")
        group = self._group(runner_group_id)
        if self.find_scale_sets(tenant_id, name=name, runner_group_id=group.id):
            raise errors.scale_set_exists(name)
        clean_labels = [{"type": lb.get("type") or "System", "name": lb["name"]} for lb in labels if lb.get("name")]
        scale_set = ScaleSet(
            id=self._id("scale_set"),
            tenant_id=tenant_id,
            name=name,
            runner_group_id=group.id,
            runner_group_name=group.name,
            labels=clean_labels or [{"type": "System", "name": name}],
            disable_update=disable_update,
            created_on=self.now(),
        )
        self.scale_sets[scale_set.id] = scale_set
        self._queues[scale_set.id] = _Queue()
        self._route_queued_jobs()
        self._changed()
        return scale_set

    def update_scale_set(
        self,
        tenant_id: int,
        scale_set_id: int,
        *,
        name: str | None = None,
        runner_group_id: int | None = None,
        labels: Sequence[dict[str, str]] | None = None,
        disable_update: bool | None = None,
    ) -> ScaleSet:
        """Apply the fields that are set (zero values mean "unchanged", as Go's omitempty sends them)."""
        scale_set = self.scale_set(tenant_id, scale_set_id)
        if runner_group_id:
            group = self._group(runner_group_id)
            scale_set.runner_group_id, scale_set.runner_group_name = group.id, group.name
        if name:
            scale_set.name = name
        if labels:
            scale_set.labels = [{"type": lb.get("type") or "System", "name": lb["name"]} for lb in labels]
        if disable_update is not None:
            scale_set.disable_update = disable_update
        self._route_queued_jobs()
        self._changed()
        return scale_set

    def delete_scale_set(self, tenant_id: int | None, scale_set_id: int) -> None:
        """Delete a scale set: its session and runners go; its unstarted jobs wait for another match.

        ``tenant_id`` None deletes regardless of tenant (fault injection: "deleted behind your back").
        Running jobs run to completion on their (now deregistered) runners.
        """
        scale_set = self.scale_sets.get(scale_set_id)
        if scale_set is None or (tenant_id is not None and scale_set.tenant_id != tenant_id):
            raise errors.scale_set_not_found(scale_set_id)
        del self.scale_sets[scale_set_id]
        self.sessions.pop(scale_set_id, None)
        self._queues.pop(scale_set_id, None)
        for runner in [r for r in self.runners.values() if r.scale_set_id == scale_set_id]:
            self._deregister(runner)
        for job in self.jobs.values():
            if job.scale_set_id == scale_set_id and job.state in (JobState.AVAILABLE, JobState.ACQUIRED):
                job.state, job.scale_set_id, job.acquired_at = JobState.QUEUED, None, None
        self._route_queued_jobs()
        self._changed()

    # ---------------------------------------------------------------- statistics

    def statistics(self, scale_set_id: int) -> Statistics:
        jobs = [j for j in self.jobs.values() if j.scale_set_id == scale_set_id and j.state != JobState.COMPLETED]
        available = sum(1 for j in jobs if j.state == JobState.AVAILABLE)
        acquired = sum(1 for j in jobs if j.state == JobState.ACQUIRED)
        running = sum(1 for j in jobs if j.state == JobState.RUNNING)
        runners = [r for r in self.runners.values() if r.scale_set_id == scale_set_id]
        busy = sum(1 for r in runners if r.busy)
        return Statistics(
            total_available_jobs=available,
            total_acquired_jobs=acquired,
            total_assigned_jobs=acquired + running,
            total_running_jobs=running,
            total_registered_runners=len(runners),
            total_busy_runners=busy,
            total_idle_runners=len(runners) - busy,
        )

    # ---------------------------------------------------------------- runners

    def generate_jit_config(
        self, tenant_id: int, scale_set_id: int, *, name: str, work_folder: str, service_url: str
    ) -> tuple[Runner, str]:
        """Register a runner called ``name`` in the scale set; returns it and its encoded JIT config."""
        self.scale_set(tenant_id, scale_set_id)
        if not name:
            raise errors.bad_request("The runner name is required.")
        if self.runners_named(tenant_id, name):
            raise errors.agent_exists(name)
        runner = Runner(
            id=self._id("runner"),
            name=name,
            tenant_id=tenant_id,
            scale_set_id=scale_set_id,
            registered_at=self.now(),
            work_folder=work_folder,
        )
        self.runners[runner.id] = runner
        self._runner_ids_by_name.setdefault(name.lower(), set()).add(runner.id)
        self._changed()
        return runner, encode_jit_config(runner, service_url=service_url)

    def runner(self, tenant_id: int, runner_id: int) -> Runner:
        found = self.runners.get(runner_id)
        if found is None or found.tenant_id != tenant_id:
            raise errors.agent_not_found(runner_id)
        return found

    def runners_named(self, tenant_id: int | None, name: str) -> list[Runner]:
        found = (self.runners[i] for i in self._runner_ids_by_name.get(name.lower(), ()))
        return [r for r in found if tenant_id is None or r.tenant_id == tenant_id]

    def remove_runner(self, tenant_id: int, runner_id: int) -> None:
        """Unregister an idle runner: JobStillRunning while it runs a job, AgentNotFound for an ID the tenant
        never registered.

        Removing a runner that is already removed (by a client, by the service after its job, or with its scale
        set) succeeds and changes nothing, as on GitHub: ARC removes each idle runner of a scale-down twice (the
        set, then the runner's finalizer) and its client takes nothing but 204 for an answer.
        """
        if self._removed_runner_tenants.get(runner_id) == tenant_id:
            return
        runner = self.runner(tenant_id, runner_id)
        if runner.busy:
            raise errors.job_still_running(runner.name)
        self._deregister(runner)
        self._changed()

    def _deregister(self, runner: Runner) -> None:
        self.runners.pop(runner.id, None)
        ids = self._runner_ids_by_name.get(runner.name.lower())
        if ids is not None:
            ids.discard(runner.id)
            if not ids:
                del self._runner_ids_by_name[runner.name.lower()]
        self.removed_runners.append(runner)
        self._removed_runner_tenants[runner.id] = runner.tenant_id

    def _runner_by_name(self, name: str) -> Runner:
        found = self.runners_named(None, name)
        if not found:
            raise errors.agent_not_found(name)
        return max(found, key=lambda r: r.id)  # the newest registration wins a cross-tenant clash

    def runner_online(self, name: str) -> Runner:
        """The runner process in ``name``'s pod has started and connected: it may now take a job."""
        runner = self._runner_by_name(name)
        if not runner.online:
            runner.online, runner.online_at = True, self.now()
        self._assign_jobs(runner.scale_set_id)
        self._changed()
        return runner

    def runner_exit(self, name: str, *, exit_code: int = 0) -> None:
        """The runner process ended. A job it was running ends with result ``failed``."""
        runner = self._runner_by_name(name)
        runner.online = False
        if runner.job_request_id is not None:
            self._complete(self.jobs[runner.job_request_id], result="failed")
        self._changed()

    def request_runner_exit(self, name: str, *, exit_code: int, reason: str) -> RunnerExitRequest:
        """Ask the pod player to end this runner's pod with ``exit_code`` (the runner goes offline now)."""
        event = RunnerExitRequest(len(self.runner_events) + 1, name, exit_code, reason)
        self.runner_events.append(event)
        if self.runners_named(None, name):
            self.runner_exit(name, exit_code=exit_code)
        self._changed()
        return event

    def runner_events_after(self, seq: int) -> list[RunnerExitRequest]:
        return self.runner_events[max(seq, 0) :]

    # ---------------------------------------------------------------- jobs

    def enqueue_job(
        self,
        labels: str | Sequence[str],
        *,
        repository: str = "org/repo",
        workflow_ref: str | None = None,
        display_name: str | None = None,
        duration: float = 1.0,
        event_name: str = "push",
        result: str = "succeeded",
    ) -> JobRecord:
        label_list = (labels,) if isinstance(labels, str) else tuple(labels)
        if not label_list or "/" not in repository:
            raise ValueError("a job needs at least one label and an owner/repo repository")
        request_id = self._id("job")
        job = JobRecord(
            request_id=request_id,
            job_id=str(uuid.uuid4()),
            labels=label_list,
            repository=repository,
            workflow_ref=workflow_ref or f"{repository}/.github/workflows/ci.yml@refs/heads/main",
            display_name=display_name or f"job-{request_id}",
            event_name=event_name,
            workflow_run_id=self._id("run"),
            duration=duration,
            result=result,
            enqueued_at=self.now(),
        )
        self.jobs[request_id] = job
        self._route(job, self._held_jobs())
        self._changed()
        return job

    def _route(self, job: JobRecord, held: dict[int, int]) -> None:
        """Offer ``job`` to the scale set that takes it (module docstring, "Routing"), if one can now.

        ``held`` counts each set's unfinished jobs; it is updated with the offer made.
        """
        wanted = frozenset(label.lower() for label in job.labels)
        matching = [
            scale_set
            for scale_set in sorted(self.scale_sets.values(), key=lambda s: s.id)
            if wanted <= scale_set.label_names and self.tenants[scale_set.tenant_id].covers(job.repository)
        ]
        advertising = [(s, capacity) for s in matching if (capacity := self._advertised_capacity(s.id)) is not None]
        chosen = next((s for s, capacity in advertising if held.get(s.id, 0) < capacity), None)
        if chosen is None and not advertising and matching:
            chosen = matching[0]
        if chosen is None:
            return
        job.state, job.scale_set_id = JobState.AVAILABLE, chosen.id
        held[chosen.id] = held.get(chosen.id, 0) + 1
        self._emit(chosen.id, "JobAvailable", job)

    def _route_queued_jobs(self) -> None:
        queued = [job for job in self.jobs.values() if job.state == JobState.QUEUED]
        if queued:
            held = self._held_jobs()
            for job in queued:
                self._route(job, held)

    def _held_jobs(self) -> dict[int, int]:
        """Each scale set's jobs offered, acquired or running: what counts against its advertised capacity."""
        held: dict[int, int] = {}
        for job in self.jobs.values():
            if job.scale_set_id is not None and job.state in _HELD_STATES:
                held[job.scale_set_id] = held.get(job.scale_set_id, 0) + 1
        return held

    def _advertised_capacity(self, scale_set_id: int) -> int | None:
        """The capacity the set's live session advertised with its last poll; ``None``: none advertised."""
        session = self._live_session(scale_set_id)
        return None if session is None else session.max_capacity

    def advertise_capacity(self, session: Session, capacity: int) -> None:
        """A poll carried ``X-ScaleSetMaxCapacity``: the session's capacity; queued jobs it now admits are offered."""
        if session.max_capacity == capacity:
            return
        session.max_capacity = capacity
        self._route_queued_jobs()
        self._changed()

    def acquirable_jobs(self, tenant_id: int, scale_set_id: int) -> list[JobRecord]:
        self.scale_set(tenant_id, scale_set_id)
        return [j for j in self.jobs.values() if j.scale_set_id == scale_set_id and j.state == JobState.AVAILABLE]

    def acquire_jobs(self, scale_set_id: int, request_ids: Iterable[int]) -> list[int]:
        """Acquire the listed jobs that are available to this scale set; returns the ones acquired now."""
        acquired = []
        for request_id in request_ids:
            job = self.jobs.get(request_id)
            if job is None or job.scale_set_id != scale_set_id or job.state != JobState.AVAILABLE:
                continue
            job.state, job.acquired_at = JobState.ACQUIRED, self.now()
            acquired.append(request_id)
            # The real service answers an acquisition with JobAssigned: it is the message that carries the
            # raised totalAssignedJobs to the listener, which then asks for a runner for the job.
            self._emit(scale_set_id, "JobAssigned", job)
        if acquired:
            self._assign_jobs(scale_set_id)
            self._changed()
        return acquired

    def _assign_jobs(self, scale_set_id: int) -> None:
        """Give acquired jobs (oldest acquisition first) to online idle runners (longest online first)."""
        waiting = sorted(
            (j for j in self.jobs.values() if j.scale_set_id == scale_set_id and j.state == JobState.ACQUIRED),
            key=lambda j: (j.acquired_at or self.now(), j.request_id),
        )
        idle = sorted(
            (r for r in self.runners.values() if r.scale_set_id == scale_set_id and r.online and not r.busy),
            key=lambda r: (r.online_at or self.now(), r.id),
        )
        for job, runner in zip(waiting, idle, strict=False):
            now = self.now()
            job.state = JobState.RUNNING
            job.assigned_at = job.started_at = now
            job.completes_at = now + dt.timedelta(seconds=job.duration)
            job.runner_name, job.runner_id = runner.name, runner.id
            job.run_count += 1
            runner.job_request_id = job.request_id
            runner.jobs_run += 1
            self._emit(scale_set_id, "JobStarted", job)

    def next_deadline(self) -> dt.datetime | None:
        """When the next running job completes (the time driver sleeps until then)."""
        deadlines = [j.completes_at for j in self.jobs.values() if j.state == JobState.RUNNING and j.completes_at]
        return min(deadlines, default=None)

    def complete_due_jobs(self) -> list[JobRecord]:
        now = self.now()
        due = [
            j
            for j in self.jobs.values()
            if j.state == JobState.RUNNING and j.completes_at is not None and j.completes_at <= now
        ]
        for job in sorted(due, key=lambda j: (j.completes_at or now, j.request_id)):
            self._complete(job, result=job.result)
        if due:
            self._changed()
        return due

    def _complete(self, job: JobRecord, *, result: str) -> None:
        self._finish(job, result=result)
        self._route_queued_jobs()  # the job's set has room for one more

    def _finish(self, job: JobRecord, *, result: str) -> None:
        job.state, job.finished_at, job.final_result = JobState.COMPLETED, self.now(), result
        runner = self.runners.get(job.runner_id) if job.runner_id is not None else None
        if job.scale_set_id is not None and job.scale_set_id in self.scale_sets:
            self._emit(job.scale_set_id, "JobCompleted", job)
        if runner is None:
            # The runner was deregistered (its scale set deleted) while running: still tell its pod to end.
            if job.runner_name is not None:
                self._runner_done(job.runner_name, reason="job completed (runner deregistered)")
            return
        runner.job_request_id = None
        if runner.online:
            # The job ran to its end: an ephemeral runner process exits 0 afterwards. (A runner that
            # exited mid-job is already offline, and its pod already ended.)
            runner.online = False
            self._runner_done(runner.name, reason=f"job {job.request_id} {result}")
        if self.config.deregister_finished_runners:
            self._deregister(runner)

    def _runner_done(self, name: str, *, reason: str) -> None:
        self.runner_events.append(RunnerExitRequest(len(self.runner_events) + 1, name, 0, reason))

    # ---------------------------------------------------------------- sessions and messages

    def _live_session(self, scale_set_id: int) -> Session | None:
        session = self.sessions.get(scale_set_id)
        if session is None:
            return None
        idle = (self.now() - session.last_seen).total_seconds()
        if session.polls_in_flight == 0 and idle > self.config.session_timeout:
            del self.sessions[scale_set_id]
            return None
        return session

    def create_session(self, tenant_id: int, scale_set_id: int, *, owner: str) -> Session:
        self.scale_set(tenant_id, scale_set_id)
        held = self._live_session(scale_set_id)
        if held is not None:
            raise errors.session_conflict(scale_set_id, held.owner)
        now = self.now()
        session = Session(
            id=str(uuid.uuid4()),
            scale_set_id=scale_set_id,
            owner=owner,
            queue_token=_new_token("simq_"),
            queue_token_expires=now + dt.timedelta(seconds=self.config.queue_token_ttl),
            created_at=now,
            last_seen=now,
        )
        self.sessions[scale_set_id] = session
        self._reoffer_available_jobs(scale_set_id)
        self._changed()
        return session

    def _reoffer_available_jobs(self, scale_set_id: int) -> None:
        queue = self._queues.setdefault(scale_set_id, _Queue())
        # A message queue belongs to its session: what the old session was delivered and did not acknowledge
        # goes with it (a successor that resumes the old session instead gets it again). Events not delivered
        # yet stay, and every job still waiting to be acquired is offered to the new session.
        queue.outbox = []
        queue.pending = [item for item in queue.pending if item["messageType"] != "JobAvailable"]
        for job in sorted(self.jobs.values(), key=lambda j: j.request_id):
            if job.scale_set_id == scale_set_id and job.state == JobState.AVAILABLE:
                self._emit(scale_set_id, "JobAvailable", job)

    def session(self, tenant_id: int, scale_set_id: int, session_id: str) -> Session:
        self.scale_set(tenant_id, scale_set_id)
        session = self._live_session(scale_set_id)
        if session is None or session.id != session_id:
            raise errors.session_not_found(session_id)
        return session

    def refresh_session(self, tenant_id: int, scale_set_id: int, session_id: str) -> Session:
        session = self.session(tenant_id, scale_set_id, session_id)
        now = self.now()
        session.queue_token = _new_token("simq_")
        session.queue_token_expires = now + dt.timedelta(seconds=self.config.queue_token_ttl)
        session.last_seen = now
        self._changed()
        return session

    def delete_session(self, tenant_id: int, scale_set_id: int, session_id: str) -> None:
        self.session(tenant_id, scale_set_id, session_id)
        del self.sessions[scale_set_id]
        self._changed()

    def evict_session(self, scale_set_id: int) -> bool:
        """Drop the scale set's session as if the service had expired it (fault injection)."""
        evicted = self.sessions.pop(scale_set_id, None) is not None
        self._changed()
        return evicted

    def expire_queue_tokens(self) -> None:
        for session in self.sessions.values():
            session.queue_token_expires = self.now() - dt.timedelta(seconds=1)
        self._changed()

    def authorize_queue(self, scale_set_id: int, session_id: str | None, token: str | None) -> Session:
        """The session a queue-token request belongs to: 404 when it is gone, 401 for a bad/expired token."""
        session = self._live_session(scale_set_id)
        if session is None or (session_id is not None and session.id != session_id):
            raise errors.session_not_found(session_id or "")
        if (
            token is None
            or not secrets.compare_digest(token, session.queue_token)
            or self.now() >= session.queue_token_expires
        ):
            raise errors.unauthorized("The message queue access token is invalid or has expired.")
        session.last_seen = self.now()
        return session

    def next_message(self, scale_set_id: int, *, last_message_id: int) -> Message | None:
        """The message a queue read returns now, or None (the caller long-polls)."""
        queue = self._queues.setdefault(scale_set_id, _Queue())
        queue.outbox = [m for m in queue.outbox if m.id > last_message_id]
        if not queue.outbox and queue.pending:
            message = Message(queue.next_message_id, queue.pending, self.statistics(scale_set_id))
            queue.next_message_id += 1
            queue.pending = []
            queue.outbox.append(message)
        return queue.outbox[0] if queue.outbox else None

    def ack_message(self, scale_set_id: int, message_id: int) -> None:
        queue = self._queues.get(scale_set_id)
        if queue is not None:
            queue.outbox = [m for m in queue.outbox if m.id != message_id]
        self._changed()

    def has_message(self, scale_set_id: int, *, last_message_id: int) -> bool:
        queue = self._queues.get(scale_set_id)
        if queue is None:
            return False
        return bool(queue.pending) or any(m.id > last_message_id for m in queue.outbox)

    def _emit(self, scale_set_id: int, message_type: str, job: JobRecord) -> None:
        self._queues.setdefault(scale_set_id, _Queue()).pending.append(job_message(message_type, job))


def job_message(message_type: str, job: JobRecord) -> dict[str, Any]:
    """One element of a message body, with the common job fields (docs/github.md) and the type's extras."""
    item: dict[str, Any] = {
        "messageType": message_type,
        "runnerRequestId": job.request_id,
        "repositoryName": job.repository_name,
        "ownerName": job.owner_name,
        "jobId": job.job_id,
        "jobWorkflowRef": job.workflow_ref,
        "jobDisplayName": job.display_name,
        "workflowRunId": job.workflow_run_id,
        "eventName": job.event_name,
        "requestLabels": list(job.labels),
        "queueTime": rfc3339(job.enqueued_at),
        "scaleSetAssignTime": rfc3339(job.acquired_at),
        "runnerAssignTime": rfc3339(job.assigned_at),
        "finishTime": rfc3339(job.finished_at),
    }
    if message_type == "JobAvailable":
        item["acquireJobUrl"] = f"_apis/runtime/runnerscalesets/{job.scale_set_id}/acquirejobs"
    if message_type in ("JobStarted", "JobCompleted"):
        item["runnerId"] = job.runner_id
        item["runnerName"] = job.runner_name
    if message_type == "JobCompleted":
        item["result"] = job.final_result
    return item


def _new_token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(24)


def encode_jit_config(runner: Runner, *, service_url: str) -> str:
    """A JIT config shaped like the real one: base64 of a JSON map of runner files, each base64 encoded."""

    def b64(data: Any) -> str:
        return base64.b64encode(orjson.dumps(data)).decode()

    files = {
        ".runner": b64(
            {
                "agentId": runner.id,
                "agentName": runner.name,
                "poolId": 0,
                "runnerScaleSetId": runner.scale_set_id,
                "serverUrlV2": service_url,
                "workFolder": runner.work_folder or "_work",
                "ephemeral": True,
                "disableUpdate": True,
            }
        ),
        ".credentials": b64({"scheme": "OAuth", "data": {"clientId": str(uuid.uuid4())}}),
        ".credentials_rsaparams": b64({"secret": secrets.token_urlsafe(32)}),
    }
    return base64.b64encode(orjson.dumps(files)).decode()


def decode_jit_config(encoded: str) -> dict[str, Any]:
    """The ``.runner`` file of an encoded JIT config: ``agentId``, ``agentName``, ``runnerScaleSetId``, ..."""
    files = orjson.loads(base64.b64decode(encoded))
    runner: dict[str, Any] = orjson.loads(base64.b64decode(files[".runner"]))
    return runner
