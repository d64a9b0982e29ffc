"""What the EphemeralRunner controller remembers about one runner: its slot in the controller's
:class:`~arc_scaleset.controllers.reconcile_pass.ObjectMemory` (docs/controllers.md, "The shape of a pass").

Mostly read-your-own-writes: what this process did that its caches may not show yet. A runner's status write
and its pod creation reach the informer caches through two different watch streams, in either order and a
moment later. A pass woken by the first of the two events would otherwise see half of its predecessor's work
and redo the other half: read the JIT Secret again, write the same status again, or try to create a pod that
exists (AlreadyExists, then a 5 s requeue). :class:`RunnerMemory` remembers:

- the **status changes** this process wrote (merge patches) and the ``resourceVersion`` of the runner they
  were based on: while the cache still holds exactly that version, it cannot show them, and they are
  overlaid on the cached status. Any other cached version came later through the (ordered) watch, so the
  overlay is dropped: a stale overlay can never hide what someone else wrote after us;
- the **pod it created**, until the pod cache shows it or ``pod_wait`` seconds have passed (a pod deleted
  before our cache saw it is then created again);
- that a JIT Secret it sent together with the pod has **not been confirmed** (the next pass reads it);
- the **UID of the runner's JIT Secret** (``secret_uid``), from the create's answer or the read that found it
  the runner's own (:mod:`.ownership`): the Secret is deleted only under that UID as a precondition, so a
  Secret that somebody else holds under the name is never deleted. Unknown (after a restart): the Secret is
  left to the garbage collector, which deletes it with its runner;
- that it has **tried to register** the runner, so a runner's very first pass in this process skips the
  JIT Secret GET (the Secret cannot exist unless an earlier process registered the runner, and the
  Actions service then answers RunnerExists, which makes the pass read the Secret after all);
- **deferred status changes**: changes decided but held back until the runner's next status write or a
  deadline, whichever comes first (a new runner's ID is written together with its pod's first state
  instead of in a write of its own), or while the client's rate limit would make their write wait
  (:mod:`.status_hold`). They are overlaid on the status like written ones, and kept until a write carrying
  them succeeds;
- the **pod it deleted to retry** the runner (``retrying_pod``): our caches may show the pod gone before
  they show our own status write (two watch streams), so "the pod vanished while Running" must not be
  mistaken for a lost pod when we deleted it ourselves;
- the **cost labels** it last patched onto the runner's pod (``cost_patch``: the pod's UID and the patch), not
  sent again while the pod cache does not show them (:mod:`.cost_labels`);
- that it **deleted the runner** (``deleted``): its deletion path deletes the pod and the Secret. A succeeded
  runner is marked ``Succeeded`` and then deleted, two writes that come back as two events; a pass that sees
  the done phase before the deletion leaves the pod and the Secret to that path instead of deleting them
  too (issue 30: two deletes per job);
- that it **completed the deletion path** (``finalized``: our finalizers removed). The pod's and Secret's
  deletion events arrive before the cache shows the runner gone; without this, each of them ran the whole
  path again: a GitHub call, two deletes and a read per event (issue 20).

The controller forgets the slot when the runner is gone, done, or being deleted (then the slot keeps only
``finalized``). In memory only, on purpose: after a restart nothing is remembered, which costs at most one
extra read per runner, never correctness; the store binds a slot to the runner's UID, so a recreated runner
of the same name starts with nothing remembered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from arc_scaleset.clock import REAL_CLOCK, Clock

DEFAULT_POD_WAIT: Final = 5.0


def apply_merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``target`` with JSON merge patch ``patch`` applied (RFC 7386: maps merge, ``None`` removes a key)."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping):
            current = merged.get(key)
            merged[key] = apply_merge_patch(current if isinstance(current, Mapping) else {}, value)
        else:
            merged[key] = value
    return merged


@dataclass(slots=True)
class RunnerMemory:
    """One runner's slot; see the module docstring. ``clock`` and ``pod_wait`` are the controller's, bound by
    the store's slot factory. Used by one reconcile at a time (the workqueue guarantees it): no locking."""

    clock: Clock = field(default=REAL_CLOCK, repr=False)
    pod_wait: float = DEFAULT_POD_WAIT
    registration_tried: bool = False
    secret_unconfirmed: bool = False
    secret_uid: str = ""
    status_based_on: str = ""
    unseen_status: dict[str, Any] = field(default_factory=dict)
    pod_deadline: float | None = None
    deferred: dict[str, Any] = field(default_factory=dict)
    deferred_until: float = 0.0
    deferred_since: float = 0.0
    retrying_pod: str | None = None
    cost_patch: tuple[str, dict[str, Any]] | None = None
    deleted: bool = False
    finalized: bool = False

    # -- status -------------------------------------------------------------------------------------------

    def status(self, resource_version: str, cached: Mapping[str, Any]) -> Mapping[str, Any]:
        """The runner's status as this process last made it: ``cached`` (of the cached runner at
        ``resource_version``) plus our writes that version cannot show."""
        status: Mapping[str, Any] = cached
        if self.unseen_status:
            if self.status_based_on == resource_version:
                status = apply_merge_patch(status, self.unseen_status)
            else:
                self.unseen_status = {}
        if self.deferred:
            status = apply_merge_patch(status, self.deferred)
        return status

    def wrote_status(self, based_on: str, changes: Mapping[str, Any]) -> None:
        """Record a status merge patch that the API server accepted, written after reading the runner at
        resourceVersion ``based_on``."""
        if self.unseen_status and self.status_based_on == based_on:
            self.unseen_status = apply_merge_patch(self.unseen_status, changes)
        else:
            self.unseen_status = dict(changes)
        self.status_based_on = based_on

    def defer_status(self, changes: Mapping[str, Any], *, for_seconds: float) -> None:
        """Hold ``changes`` back: they go out with the runner's next status write, or on their own once
        ``for_seconds`` have passed (an earlier deadline of changes already held stays)."""
        if not changes:
            return
        if not self.deferred:
            self.deferred_since = self.clock.monotonic()
            self.deferred_until = self.deferred_since + for_seconds
        self.deferred = apply_merge_patch(self.deferred, changes)

    def hold_status(self, changes: Mapping[str, Any], *, for_seconds: float) -> None:
        """Hold ``changes`` back together with those already held, all of them due ``for_seconds`` from now
        whatever their deadline was (their write would wait for the client's rate limit: :mod:`.status_hold`)."""
        now = self.clock.monotonic()
        if not self.deferred:
            self.deferred_since = now
        self.deferred = apply_merge_patch(self.deferred, changes)
        self.deferred_until = now + for_seconds

    def held_for(self) -> float:
        """Seconds since the changes held back now were first held (0: none are)."""
        return self.clock.monotonic() - self.deferred_since if self.deferred else 0.0

    def deferred_status(self) -> tuple[dict[str, Any], float]:
        """The changes held back and the seconds until they are due (0: due now, or none)."""
        if not self.deferred:
            return {}, 0.0
        return dict(self.deferred), max(0.0, self.deferred_until - self.clock.monotonic())

    def deferred_written(self) -> None:
        """A status write carrying the deferred changes succeeded."""
        self.deferred = {}

    # -- the pod ----------------------------------------------------------------------------------------

    def created_pod(self) -> None:
        """Record that this process created the runner's pod just now."""
        self.pod_deadline = self.clock.monotonic() + self.pod_wait

    def awaiting_pod(self, *, cached: bool) -> float:
        """Seconds to wait for the pod cache to show the pod we created (0: not waiting).

        ``cached``: whether the pod cache shows the runner's pod now (that ends the wait).
        """
        if self.pod_deadline is None:
            return 0.0
        remaining = self.pod_deadline - self.clock.monotonic()
        if cached or remaining <= 0:
            self.pod_deadline = None
            return 0.0
        return remaining

    # -- registration -----------------------------------------------------------------------------------

    def first_registration(self) -> bool:
        """True the first time this process is about to register the runner (and records the attempt)."""
        first = not self.registration_tried
        self.registration_tried = True
        return first
