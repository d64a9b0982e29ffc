"""The runner shape of a scale set, and which scale sets share a warm pool: pure.

A placeholder holds room for *a* runner of any scale set whose runner pods need the same room in the same place:
the same resource requests (what the scheduler reserves), the same runner image (what a node pulls ahead of time)
and the same node selection (``nodeSelector``, node affinity, tolerations: which nodes may hold the runner). That
is a :class:`RunnerShape`; scale sets with equal shapes form one pool, so ten scale sets with the same runners keep
one buffer between them, not ten.

Only the shape crosses into the namespace where placeholders live (the controller's): never the template's
command, environment, volumes, service account, security settings or metadata. Pod (anti-)affinity and topology
spread constraints are left out on purpose: they select *pods* in the runner's namespace and would mean something
else for a placeholder in another namespace.

Requests are what the scheduler reserves for the pod: per resource, the larger of the containers' sum and the
largest init container's (init containers run one at a time), written canonically (``1000m`` and ``1`` are the
same shape).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from arc_scaleset.api.keys import RUNNER_CONTAINER_NAME
from arc_scaleset.kube.quantity import InvalidQuantity, Quantity, parse_quantity

POOL_ID_LENGTH = 16
"""Hex digits of a pool's ID (a label value): 64 bits, so two different shapes never meet by chance."""


@dataclass(frozen=True)
class RunnerShape:
    """What a placeholder must reserve for one runner; equal shapes share a pool."""

    requests: tuple[tuple[str, str], ...]
    """(resource name, canonical quantity), sorted by name."""
    image: str
    node_selector: tuple[tuple[str, str], ...] = ()
    node_affinity: str = ""
    """The runner pod's ``affinity.nodeAffinity`` as canonical JSON (``""``: none)."""
    tolerations: str = ""
    """The runner pod's ``tolerations`` as canonical JSON (``""``: none)."""

    @property
    def pool_id(self) -> str:
        """The pool's ID: a digest of the shape, short enough for a label value and a pod name. It names the
        pool (the identity of a group), it is never compared to detect a change."""
        canonical = json.dumps(
            [self.requests, self.image, self.node_selector, self.node_affinity, self.tolerations], sort_keys=True
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:POOL_ID_LENGTH]

    def describe(self) -> str:
        """The shape in words, for an annotation, a condition or an Event."""
        requests = ",".join(f"{name}={value}" for name, value in self.requests) or "none"
        where = ",".join(f"{key}={value}" for key, value in self.node_selector)
        extras = [f"nodeSelector {where}"] if where else []
        extras += ["node affinity"] if self.node_affinity else []
        extras += ["tolerations"] if self.tolerations else []
        return f"requests {requests}; image {self.image}" + "".join(f"; {extra}" for extra in extras)

    def requests_map(self) -> dict[str, str]:
        return dict(self.requests)

    def node_affinity_object(self) -> dict[str, Any] | None:
        return json.loads(self.node_affinity) if self.node_affinity else None

    def toleration_list(self) -> list[dict[str, Any]] | None:
        return json.loads(self.tolerations) if self.tolerations else None


class ShapeError(ValueError):
    """The runner template gives no shape a placeholder can take (the message says which field and why)."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":")) if value else ""


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Quantity]:
    """Per resource name, what the scheduler reserves for a pod of ``spec`` (see the module docstring);
    raises :class:`ShapeError` for a quantity the API server would refuse."""
    totals: dict[str, Fraction] = {}
    init_peaks: dict[str, Fraction] = {}
    for group, combine in (("containers", totals), ("initContainers", init_peaks)):
        for index, container in enumerate(_sequence(spec.get(group))):
            requests = _mapping(_mapping(_mapping(container).get("resources")).get("requests"))
            for name, raw in requests.items():
                try:
                    value = parse_quantity(raw).value
                except (InvalidQuantity, TypeError) as exc:
                    raise ShapeError(f"template.spec.{group}[{index}].resources.requests.{name}: {exc}") from None
                if group == "containers":
                    combine[name] = combine.get(name, Fraction(0)) + value
                else:
                    combine[name] = max(combine.get(name, Fraction(0)), value)
    names = sorted({*totals, *init_peaks})
    return {name: Quantity(max(totals.get(name, Fraction(0)), init_peaks.get(name, Fraction(0)))) for name in names}


def runner_shape(template: Mapping[str, Any]) -> RunnerShape:
    """The shape of runner pods built from ``template`` (a PodTemplateSpec); raises :class:`ShapeError` when
    it has no ``runner`` container with an image, or a request that is no quantity."""
    spec = _mapping(_mapping(template).get("spec"))
    runner = next(
        (c for c in _sequence(spec.get("containers")) if _mapping(c).get("name") == RUNNER_CONTAINER_NAME), None
    )
    image = _mapping(runner).get("image")
    if not isinstance(image, str) or not image:
        raise ShapeError(f'template.spec.containers: no container named "{RUNNER_CONTAINER_NAME}" with an image')
    requests = pod_requests(spec)
    selector = _mapping(spec.get("nodeSelector"))
    return RunnerShape(
        requests=tuple((name, quantity.canonical()) for name, quantity in requests.items() if not quantity.is_zero()),
        image=image,
        node_selector=tuple(sorted((str(key), str(value)) for key, value in selector.items())),
        node_affinity=_canonical_json(_mapping(spec.get("affinity")).get("nodeAffinity")),
        tolerations=_canonical_json(list(_sequence(spec.get("tolerations")))),
    )
