"""Scale sets as the demo and the e2e suite use them: the manifests they apply and what they observe.

:func:`autoscaling_runner_set` builds an AutoscalingRunnerSet the way a Helm user ends up with one;
:func:`observe` reads one scale set's whole state (ARS, ERS, runners, listener pod, sim session) into a
:class:`ScaleSetSnapshot`, a plain value that the live view renders and tests assert on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import arc_scaleset
from arc_scaleset.api import keys
from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.common import API_VERSION
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.runner_sets import sort_runner_sets
from arc_scaleset.api.views import (
    AutoscalingListenerView,
    AutoscalingRunnerSetView,
    EphemeralRunnerSetView,
    EphemeralRunnerView,
)
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.views import ObjectView, PodView
from arc_scaleset_lab.sim.admin_client import SimAdminClient

RUNNER_IMAGE = "ghcr.io/actions/actions-runner:2.330.0"
TEMPLATE_REVISION_ENV = "DEMO_TEMPLATE_REVISION"


def runner_template(*, image: str = RUNNER_IMAGE, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A runner pod template like the chart's default: one ``runner`` container running ``run.sh``."""
    container: dict[str, Any] = {"name": "runner", "image": image, "command": ["/home/runner/run.sh"]}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"spec": {"restartPolicy": "Never", "containers": [container]}}


def autoscaling_runner_set(
    *,
    name: str,
    namespace: str,
    config_url: str,
    secret: str,
    min_runners: int,
    max_runners: int,
    template: Mapping[str, Any],
    scale_set_name: str | None = None,
) -> dict[str, Any]:
    """An AutoscalingRunnerSet; its jobs are those labelled ``scale_set_name`` (default: ``name``).

    Labelled with this build's version, as the chart does: the controller refuses (deletes) a set whose
    ``app.kubernetes.io/version`` it does not accept.
    """
    return {
        "apiVersion": API_VERSION,
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {keys.LABEL_VERSION: arc_scaleset.__version__}},
        "spec": {
            "githubConfigUrl": config_url,
            "githubConfigSecret": secret,
            "runnerScaleSetName": scale_set_name or name,
            "minRunners": min_runners,
            "maxRunners": max_runners,
            "template": dict(template),
        },
    }


@dataclass(frozen=True)
class RunnerView:
    """One EphemeralRunner as the view and the tests see it."""

    name: str
    uid: str
    phase: str  # status.phase, "" before the first status write
    revision: int  # the actionable-revision annotation (0 when missing)
    busy: bool  # a job was assigned (status.jobId / jobRequestId set)
    deleting: bool
    runner_set: str = ""  # the EphemeralRunnerSet that owns it

    @classmethod
    def of(cls, er: Mapping[str, Any]) -> RunnerView:
        view = EphemeralRunnerView(er)
        owner = view.controller_owner or {}
        return cls(
            name=view.name,
            uid=view.uid,
            phase=view.phase,
            revision=view.revision,
            busy=view.has_job or bool(view.status.get("jobRequestId")),
            deleting=view.is_deleting,
            runner_set=str(owner.get("name") or ""),
        )


@dataclass(frozen=True)
class ScaleSetSnapshot:
    """One scale set's state at one moment (objects are None when absent)."""

    ars: dict[str, Any] | None
    ers: dict[str, Any] | None  # the current EphemeralRunnerSet (controllers/runner_sets.py)
    runners: tuple[RunnerView, ...]  # of every EphemeralRunnerSet of the scale set (draining ones too)
    listener_name: str | None
    listener_pod_phase: str | None
    session_owner: str | None  # the sim's message session for the scale set, if one is held
    scale_set_id: int | None
    jit_secrets: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    runner_sets: tuple[str, ...] = ()  # names of every EphemeralRunnerSet of the scale set, the current one first

    @property
    def replicas(self) -> int:
        return EphemeralRunnerSetView(self.ers or {}).replicas

    @property
    def patch_id(self) -> int:
        return EphemeralRunnerSetView(self.ers or {}).patch_id

    @property
    def desired_revision(self) -> int:
        return EphemeralRunnerSetView(self.ers or {}).actionable_revision

    @property
    def applied_revision(self) -> int:
        return EphemeralRunnerSetView(self.ers or {}).applied_actionable_revision

    @property
    def ars_phase(self) -> str:
        return AutoscalingRunnerSetView(self.ars or {}).phase

    def by_phase(self) -> Counter[str]:
        return Counter((r.phase or "New") if not r.deleting else "Deleting" for r in self.runners)

    def by_revision(self) -> Counter[int]:
        return Counter(r.revision for r in self.runners if not r.deleting)

    @property
    def busy(self) -> int:
        return sum(1 for r in self.runners if r.busy and not r.deleting)

    def live_runners(self) -> list[RunnerView]:
        return [r for r in self.runners if not r.deleting]

    def settled_at(self, count: int) -> bool:
        """Whether the set rests at ``count`` idle Running runners, all of the desired revision, with the
        desired revision applied (what "scaled back to its minimum after the update" means)."""
        live = self.live_runners()
        return (
            self.ers is not None
            and self.replicas == count
            and len(live) == count
            and self.applied_revision == self.desired_revision
            and all(r.revision == self.desired_revision for r in live)
            and all(r.phase == "Running" and not r.busy for r in live)
        )

    @property
    def idle_running(self) -> int:
        return sum(1 for r in self.runners if r.phase == "Running" and not r.busy and not r.deleting)


def owned_by_runner_set(er: Mapping[str, Any], runner_set: str) -> bool:
    """Whether EphemeralRunner ``er`` belongs to the EphemeralRunnerSet named ``runner_set`` (its owner)."""
    owners = ObjectView(er).owner_references
    return any(o.get("kind") == "EphemeralRunnerSet" and o.get("name") == runner_set for o in owners)


async def _get(kube: KubeClient, resource: resources.Resource, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return await kube.get(resource, name, namespace=namespace)
    except NotFound:
        return None


async def find_listener(
    kube: KubeClient, *, controller_namespace: str, namespace: str, name: str
) -> dict[str, Any] | None:
    """The AutoscalingListener serving ARS ``namespace/name`` (linked by its spec fields, not by owner)."""
    listed = await kube.list(AUTOSCALING_LISTENERS, namespace=controller_namespace)
    for al in listed.items:
        listener = AutoscalingListenerView(al)
        if listener.scale_set_namespace == namespace and listener.scale_set_name == name:
            return al
    return None


async def observe(
    kube: KubeClient,
    sim: SimAdminClient | None,
    *,
    namespace: str,
    name: str,
    controller_namespace: str,
) -> ScaleSetSnapshot:
    """Read the scale set ``namespace/name`` and everything it owns, concurrently. Its EphemeralRunnerSets are those
    the ARS controls, whatever their names (a set adopted from ARC has a generated one); without the ARS, the one
    of the same name. Runners are those of these sets (other scale sets may share the namespace)."""
    ars, set_list, ers_list, listener, sessions = await asyncio.gather(
        _get(kube, AUTOSCALING_RUNNER_SETS, name, namespace),
        kube.list(EPHEMERAL_RUNNER_SETS, namespace=namespace),
        kube.list(EPHEMERAL_RUNNERS, namespace=namespace),
        find_listener(kube, controller_namespace=controller_namespace, namespace=namespace, name=name),
        sim.sessions() if sim is not None else _none(),
    )
    ars_uid = ObjectView(ars or {}).uid
    if ars_uid:
        sets = sort_runner_sets(s for s in set_list.items if ObjectView(s).is_owned_by(ars_uid))
    else:
        sets = sort_runner_sets(s for s in set_list.items if ObjectView(s).name == name)
    all_sets = sets.all()
    ers = dict(all_sets[0]) if all_sets else None
    set_names = tuple(ObjectView(s).name for s in all_sets)
    scale_set_id: int | None = None
    with contextlib.suppress(ValueError, TypeError, KeyError):
        scale_set_id = int(ObjectView(ars or {}).annotations[keys.ANNOTATION_RUNNER_SCALE_SET_ID])
    listener_name = ObjectView(listener).name if listener else None
    pod_phase: str | None = None
    if listener_name is not None:
        pod = await _get(kube, resources.PODS, listener_name, controller_namespace)
        if pod is not None:
            pod_view = PodView(pod)
            pod_phase = "Terminating" if pod_view.is_deleting else pod_view.phase or "Pending"
    owner = None
    for session in sessions or []:
        if scale_set_id is not None and session.get("scaleSetId") == scale_set_id:
            owner = str(session.get("ownerName") or "")
    runners = tuple(
        sorted(
            (RunnerView.of(er) for er in ers_list.items if any(owned_by_runner_set(er, n) for n in set_names)),
            key=lambda r: r.name,
        )
    )
    return ScaleSetSnapshot(
        ars=ars,
        ers=ers,
        runners=runners,
        listener_name=listener_name,
        listener_pod_phase=pod_phase,
        session_owner=owner,
        scale_set_id=scale_set_id,
        runner_sets=set_names,
    )


async def _none() -> list[dict[str, Any]]:
    return []
