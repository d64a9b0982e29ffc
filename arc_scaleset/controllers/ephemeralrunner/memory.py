"""Read-your-own-writes for the EphemeralRunner controller: what this process did that its caches may not
show yet.

A runner's status write and its pod creation reach the informer caches through two different watch
streams, in either order and a moment later. A pass woken by the first of the two events would otherwise
see half of its predecessor's work and redo the other half: read the JIT Secret again, write the same
status again, or try to create a pod that exists (AlreadyExists, then a 5 s requeue). :class:`RunnerMemory`
remembers, per runner:

- the **status changes** this process wrote (merge patches) and the ``resourceVersion`` of the runner they
  were based on: while the cache still holds exactly that version, it cannot show them, and they are
  overlaid on the cached status. Any other cached version came later through the (ordered) watch, so the
  overlay is dropped: a stale overlay can never hide what someone else wrote after us;
- the **pod it created**, until the pod cache shows it or ``pod_wait`` seconds have passed (a pod deleted
  before our cache saw it is then created again);
- that a JIT Secret it sent together with the pod has **not been confirmed** (the next pass reads it);
- that it has **tried to register** the runner, so a runner's very first pass in this process skips the
  JIT Secret GET (the Secret cannot exist unless an earlier process registered the runner, and the
  Actions service then answers RunnerExists, which makes the pass read the Secret after all);
- **deferred status changes**: changes decided but held back until the runner's next status write or a
  deadline, whichever comes first (a new runner's ID is written together with its pod's first state
  instead of in a write of its own). They are overlaid on the status like written ones, and kept until a
  write carrying them succeeds.

In memory only, on purpose: after a restart the caches are listed fresh and nothing is remembered, which
costs at most one extra read per runner, never correctness. Keys are ``namespace/name`` with the runner's
UID, so a recreated runner of the same name starts with nothing remembered.
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


@dataclass
class _Runner:
    uid: str
    registration_tried: bool = False
    secret_unconfirmed: bool = False
    status_based_on: str = ""
    unseen_status: dict[str, Any] = field(default_factory=dict)
    pod_deadline: float | None = None
    deferred_status: dict[str, Any] = field(default_factory=dict)
    deferred_until: float = 0.0


class RunnerMemory:
    """Per-runner recollection of this process's own writes; see the module docstring.

    Used by one reconcile at a time per key (the workqueue guarantees it), so no locking is needed.
    """

    def __init__(self, *, clock: Clock = REAL_CLOCK, pod_wait: float = DEFAULT_POD_WAIT) -> None:
        self._clock = clock
        self._pod_wait = pod_wait
        self._runners: dict[str, _Runner] = {}

    def __len__(self) -> int:
        return len(self._runners)

    def _entry(self, key: str, uid: str) -> _Runner:
        entry = self._runners.get(key)
        if entry is None or entry.uid != uid:
            entry = _Runner(uid)
            self._runners[key] = entry
        return entry

    def forget(self, key: str) -> None:
        """Drop everything about ``key`` (the runner is gone, being deleted, or done)."""
        self._runners.pop(key, None)

    # -- status -------------------------------------------------------------------------------------------

    def status(self, key: str, uid: str, resource_version: str, cached: Mapping[str, Any]) -> Mapping[str, Any]:
        """The runner's status as this process last made it: ``cached`` (of the cached runner at
        ``resource_version``) plus our writes that version cannot show."""
        entry = self._runners.get(key)
        if entry is None or entry.uid != uid:
            return cached
        status: Mapping[str, Any] = cached
        if entry.unseen_status:
            if entry.status_based_on == resource_version:
                status = apply_merge_patch(status, entry.unseen_status)
            else:
                entry.unseen_status = {}
        if entry.deferred_status:
            status = apply_merge_patch(status, entry.deferred_status)
        return status

    def wrote_status(self, key: str, uid: str, based_on: str, changes: Mapping[str, Any]) -> None:
        """Record a status merge patch that the API server accepted, written after reading the runner at
        resourceVersion ``based_on``."""
        entry = self._entry(key, uid)
        if entry.unseen_status and entry.status_based_on == based_on:
            entry.unseen_status = apply_merge_patch(entry.unseen_status, changes)
        else:
            entry.unseen_status = dict(changes)
        entry.status_based_on = based_on

    def defer_status(self, key: str, uid: str, changes: Mapping[str, Any], *, for_seconds: float) -> None:
        """Hold ``changes`` back: they go out with the runner's next status write, or on their own once
        ``for_seconds`` have passed (an earlier deadline of changes already held stays)."""
        if not changes:
            return
        entry = self._entry(key, uid)
        if not entry.deferred_status:
            entry.deferred_until = self._clock.monotonic() + for_seconds
        entry.deferred_status = apply_merge_patch(entry.deferred_status, changes)

    def deferred_status(self, key: str, uid: str) -> tuple[dict[str, Any], float]:
        """The changes held back for the runner and the seconds until they are due (0: due now, or none)."""
        entry = self._runners.get(key)
        if entry is None or entry.uid != uid or not entry.deferred_status:
            return {}, 0.0
        return dict(entry.deferred_status), max(0.0, entry.deferred_until - self._clock.monotonic())

    def deferred_written(self, key: str, uid: str) -> None:
        """A status write carrying the deferred changes succeeded."""
        entry = self._runners.get(key)
        if entry is not None and entry.uid == uid:
            entry.deferred_status = {}

    # -- the pod ----------------------------------------------------------------------------------------

    def created_pod(self, key: str, uid: str) -> None:
        """Record that this process created the runner's pod just now."""
        self._entry(key, uid).pod_deadline = self._clock.monotonic() + self._pod_wait

    def awaiting_pod(self, key: str, uid: str, *, cached: bool) -> float:
        """Seconds to wait for the pod cache to show the pod we created (0: not waiting).

        ``cached``: whether the pod cache shows the runner's pod now (that ends the wait).
        """
        entry = self._runners.get(key)
        if entry is None or entry.uid != uid or entry.pod_deadline is None:
            return 0.0
        remaining = entry.pod_deadline - self._clock.monotonic()
        if cached or remaining <= 0:
            entry.pod_deadline = None
            return 0.0
        return remaining

    # -- registration -----------------------------------------------------------------------------------

    def set_secret_unconfirmed(self, key: str, uid: str, unconfirmed: bool) -> None:
        """Mark that the runner's JIT Secret may be missing although its status names a runner ID (a Secret
        create that was sent together with the pod and the status write, and has not succeeded)."""
        self._entry(key, uid).secret_unconfirmed = unconfirmed

    def secret_unconfirmed(self, key: str, uid: str) -> bool:
        entry = self._runners.get(key)
        return entry is not None and entry.uid == uid and entry.secret_unconfirmed

    def first_registration(self, key: str, uid: str) -> bool:
        """True the first time this process is about to register the runner (and records the attempt)."""
        entry = self._entry(key, uid)
        first = not entry.registration_tried
        entry.registration_tried = True
        return first
