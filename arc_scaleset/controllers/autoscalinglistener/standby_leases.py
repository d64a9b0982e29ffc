"""The standby listeners' Leases, watched so that a takeover reaches the AutoscalingListener's status at once
(docs/controllers.md, "Standby listener"; issue 30).

``Ready`` of a listener with a standby is the Lease holder's (:func:`.standby.pair_readiness`): which pod is
active, ``NoActiveListener`` while neither holds the Lease. The holder changes without any pod event (a SIGTERMed
listener releases the Lease, its peer takes it while both pods still run), so without this watch the status
followed a takeover only at the listener's next pass for another reason.

:class:`StandbyLeaseWatch` is a controller Source: one informer of the Leases in the controller namespace (where
the listeners and their Leases live) carrying the listener-name label every pair's Lease has
(:func:`.standby.desired_lease`), started only while the controller runs. It keeps of each Lease its metadata
but the managed fields, and its holder (:func:`pair_fields`), and queues the listener that owns it (controller
owner reference) when the Lease appears after the first list, goes, or changes holder
(:func:`holder_changed`). The renewals, one every 2 s per active listener, arrive as watch events and queue
nothing. The controller's Role already lists and watches Leases in its namespace (its own leader election).

What it keeps is what a listener's pass compares its Lease against (:mod:`.standby_objects`), so that a pass
reads the Lease from this watch, not from the API server (:meth:`StandbyLeaseWatch.lease`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.keys import LABEL_LISTENER_NAME
from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.namespace_watch import NamespaceWatch
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.controller import Request, controller_owner_request
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.resources import LEASES

_KEPT_METADATA = ("namespace", "name", "uid", "resourceVersion", "ownerReferences", "labels", "annotations")


def pair_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The informer's transform: a Lease's ``metadata.{namespace, name, uid, resourceVersion, ownerReferences,
    labels, annotations}`` and ``spec.holderIdentity``; not its renewal times or ``managedFields``."""
    meta = obj.get("metadata") or {}
    kept = {key: meta[key] for key in _KEPT_METADATA if key in meta}
    holder = (obj.get("spec") or {}).get("holderIdentity") or ""
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": kept,
        "spec": {"holderIdentity": holder},
    }


def holder_changed(old: Object, new: Object) -> bool:
    """Whether an update of a Lease changed who holds it (a renewal does not). Pure."""
    return (old.get("spec") or {}).get("holderIdentity") != (new.get("spec") or {}).get("holderIdentity")


def lease_listener(obj: Object) -> Iterable[Request]:
    """The AutoscalingListener a Lease belongs to (its controller owner); none for any other Lease."""
    request = controller_owner_request(obj, AUTOSCALING_LISTENERS)
    return () if request is None else (request,)


def lease_label_selector(excluded_label_prefixes: Iterable[str]) -> str | None:
    """The label the pairs' Leases carry; ``None`` (every Lease of the namespace) when
    ``--exclude-label-propagation-prefix`` keeps it off them."""
    prefixes = tuple(excluded_label_prefixes)
    return None if prefixes and LABEL_LISTENER_NAME.startswith(prefixes) else LABEL_LISTENER_NAME


class StandbyLeaseWatch(NamespaceWatch):
    """The watch of the standby Leases of ``namespace`` (the controller namespace), a controller Source that
    queues a Lease's listener when its holder changes (module docstring), on the watches' own request budget
    (:mod:`~arc_scaleset.controllers.namespace_watch`)."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        namespace: str,
        excluded_label_prefixes: Iterable[str] = (),
        clock: Clock = REAL_CLOCK,
    ) -> None:
        super().__init__(
            kube,
            LEASES,
            namespace=namespace,
            clock=clock,
            label_selector=lease_label_selector(excluded_label_prefixes),
            transform=pair_fields,
        )
        self.informer.add_handler(on_add=self._added, on_update=self._updated, on_delete=self._queue)

    def lease(self, name: str) -> Object | None:
        """The Lease ``name`` of the namespace as the watch shows it (:func:`pair_fields`; shared, never mutate);
        ``None`` when the watch does not show it (not running or not listed yet, or no such Lease)."""
        return self.informer.store.get(self.namespace, name) if self.watching else None

    def _added(self, obj: Object) -> None:
        if self.informer.has_synced:  # the first list: nothing changed, every listener is reconciled anyway
            self._queue(obj)

    def _updated(self, old: Object, new: Object) -> None:
        if holder_changed(old, new):
            self._queue(new)

    def _queue(self, obj: Object) -> None:
        for request in lease_listener(obj):
            self.enqueue(request)
