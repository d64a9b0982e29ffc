"""Adopting ARC's EphemeralRunnerSet on a takeover: what it needs to be writable, and the check made before
ARC's listener is deleted (docs/migration.md, "The takeover rules").

A set is adopted in place (it keeps its name and runners), and from then on it is written by this controller
(labels, revisions) and by the new listener (``spec.replicas`` and ``spec.patchID``). The CRD validates every
write of ``spec`` against today's schema, so a set ARC made under an older schema can be unwritable:
``spec.patchID`` is required since ARC 0.9, and a set from an earlier release has none. Unchanged invalid fields
are tolerated by the API server on a write that leaves ``spec`` as it is (CRD validation ratcheting), so such a
set takes a labels-only patch, and then refuses the first write of ``spec`` -- the listener's first scaling patch,
or a revision bump -- with ``422 spec.patchID: Required value``, on every pass.

- :func:`adoption_fields`: the ``spec`` fields a set lacks that this controller adds in the same patch as its first
  write to it (``patchID: 0``: "no listener patch yet", which is how a set without one has always been read here;
  the new listener's first patch replaces it).
- :func:`writability_probe`: the write whose dry run (``dryRun=All``) tells whether the set takes a ``spec``
  write like the listener's; it is tried before ARC's listener is deleted, so a set that cannot be written leaves
  ARC's listener running and the takeover refused with a condition (:class:`AdoptionRefused`), instead of a
  scale set with no listener at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from arc_scaleset.api.keys import ANNOTATION_RUNNER_SPEC_HASH
from arc_scaleset.controllers.errors import ConfigurationError
from arc_scaleset.kube.views import ObjectView, integer

ADOPTION_DEFAULTS: Final[Mapping[str, Any]] = {"patchID": 0}
"""Required ``spec`` fields that ARC's older releases did not write, with the value an adopted set gets."""


class AdoptionRefused(ConfigurationError):  # noqa: N818 - reads as the condition it reports
    """An EphemeralRunnerSet to adopt refuses to be written: ARC's listener is kept until it can be."""

    reason = "AdoptionRefused"


def adoption_fields(ers: Mapping[str, Any]) -> dict[str, Any]:
    """The ``spec`` fields ``ers`` lacks that every write of its ``spec`` needs (``{}``: none)."""
    spec = ObjectView(ers).spec
    return {name: value for name, value in ADOPTION_DEFAULTS.items() if name not in spec}


def arcs_live_listeners(listeners: Iterable[ObjectView]) -> list[str]:
    """The names of the scale set's listeners that ARC's controller made (ARC's ``runner-spec-hash`` annotation,
    which this controller never writes) and that are not being deleted yet: while there is one, the takeover
    has not removed anything of ARC's."""
    return [
        listener.name
        for listener in listeners
        if listener.annotation(ANNOTATION_RUNNER_SPEC_HASH) and not listener.is_deleting
    ]


def writability_probe(ers: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch that writes the set's ``spec`` as the listener will (a new ``patchID``), under the set's
    ``resourceVersion``; only ever sent as a dry run."""
    view = ObjectView(ers)
    return {
        "metadata": {"resourceVersion": view.resource_version},
        "spec": {"patchID": integer(view.spec.get("patchID")) + 1},
    }


def refusal_message(ers_name: str, listener_name: str, error: str) -> str:
    """The condition's and the Warning Event's text for a set that refuses the probe."""
    return (
        f"EphemeralRunnerSet {ers_name} cannot be adopted: the API server refuses a write of its spec ({error});"
        f" ARC's listener {listener_name} is kept running until it can. Fix the set's spec so it validates"
        " against the installed CRD, or delete the set (its runners are replaced)"
    )
