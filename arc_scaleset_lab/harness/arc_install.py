"""A running scale set as ARC's released controller and listener leave it, for the takeover tests
(docs/migration.md).

:class:`ArcInstaller` plays ARC's controller (release 0.14.2, whose chart labels say so) for one scale set and
writes every object as ARC writes it -- the chart's AutoscalingRunnerSet (its labels, annotations and
finalizer, the no-permission ServiceAccount its runners use), then what ARC's resource builder
(``controllers/actions.github.com/resourcebuilder.go``) makes of it:

- EphemeralRunnerSets named ``<ARS>-<5 characters>`` (``generateName``; or the ARS's name, as ARC after #4516
  names its one set), labelled from the ARS, with ARC's ``runner-spec-hash`` annotation and ARC's finalizer
  (``ephemeralrunner.actions.github.com/finalizer``), no revision fields, and the counts ARC last wrote;
- EphemeralRunners ``<ERS>-runner-<5 characters>`` with both of ARC's finalizers, the set's labels and
  annotations (``patch-id`` added, no revision annotation), a JIT registration on the (simulated) GitHub, its
  Secret and its pod, and the status ARC's controller writes once the pod runs;
- the AutoscalingListener under the name ARC 0.13.1+ gives it (``<ARS>-<h8(ns@group@url)>-listener``, the one
  this project uses too) or the older ``<ARS>-<h8(ns)>-listener`` (0.9.0 to 0.13.0), with ARC's hash
  annotations, its ServiceAccount, Role, RoleBinding, ``config.json`` Secret and listener pod.

The listener pod is ARC's (image ``gha-runner-scale-set-controller``, command ``/ghalistener``); the lab's node
agent runs a real listener process for it from its ``config.json`` (the format is ARC's), so it holds the
scale set's message session, acquires jobs, makes runners busy and scales the set, as ARC's listener would.
Nothing reconciles these objects until the test starts a controller: ARC's controller is "scaled to 0".

A set as a release before 0.9 made it has no ``spec.patchID`` (:meth:`ArcInstaller.before_patch_id`): the CRD is
put back to that release's rule while the set is made and written, and this version's CRD applied again after,
as a user's cluster has such a set once its CRDs are upgraded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime as dt
import hashlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from arc_scaleset.api import keys
from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.common import API_VERSION
from arc_scaleset.api.crd.generate import custom_resource_definition
from arc_scaleset.api.ephemeralrunner import EPHEMERAL_RUNNERS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS, EphemeralRunnerSet
from arc_scaleset.api.labels import github_url_labels
from arc_scaleset.api.naming import autoscaling_listener_name, hash8
from arc_scaleset.github import ActionsClient, PersonalAccessToken, SystemInfo, parse_config_url
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.errors import Invalid
from arc_scaleset.kube.views import ObjectView, PodView
from arc_scaleset_lab.harness.cluster import install_crds
from arc_scaleset_lab.harness.waiting import eventually

ARC_VERSION: Final = "0.14.2"
ARC_CONTROLLER_IMAGE: Final = f"ghcr.io/actions/gha-runner-scale-set-controller:{ARC_VERSION}"
ARC_RUNNER_SET_FINALIZER: Final = "ephemeralrunner.actions.github.com/finalizer"
LISTENER_CONFIG_MOUNT: Final = "/etc/gha-listener"
PART_OF_CHART: Final = "gha-rs"


@dataclass
class ArcScaleSet:
    """What :meth:`ArcInstaller.install` made."""

    namespace: str
    name: str
    scale_set_id: int
    listener: str
    """The AutoscalingListener's name (= its pod's, = the session owner's), in the controller namespace."""
    runner_sets: list[str] = field(default_factory=list)
    """EphemeralRunnerSet names, oldest first: the last one is ARC's current set, the listener's."""
    runners: dict[str, list[str]] = field(default_factory=dict)
    """EphemeralRunner names by set."""
    uids: dict[str, str] = field(default_factory=dict)
    """UID of every object made, by ``kind/name``."""

    @property
    def current_set(self) -> str:
        return self.runner_sets[-1]

    def all_runners(self) -> list[str]:
        return [name for names in self.runners.values() for name in names]


class ArcInstaller:
    """Makes ARC's objects for scale sets in ``namespace`` against the system's cluster and simulated GitHub."""

    def __init__(
        self, kube: KubeClient, *, controller_namespace: str, config_url: str, token: str, namespace: str
    ) -> None:
        self.kube = kube
        self.controller_namespace = controller_namespace
        self.config_url = config_url
        self.token = token
        self.namespace = namespace
        self.url_labels = github_url_labels(*_url_parts(config_url))

    # -- the scale set --------------------------------------------------------------------------------

    async def install(
        self,
        name: str,
        *,
        secret: str,
        min_runners: int,
        max_runners: int,
        template: Mapping[str, Any],
    ) -> ArcScaleSet:
        """Register the scale set on GitHub and create the chart's AutoscalingRunnerSet as ARC's controller
        leaves it (finalizer, ID and group annotations, URL labels, status). No runner set, no listener yet:
        :meth:`add_runner_set`, :meth:`add_runners`, :meth:`add_listener`."""
        async with self._client() as client:
            scale_set = await client.create_runner_scale_set(name=name, runner_group_id=1)
        no_permission = f"{name}-gha-rs-no-permission"
        # The chart's ServiceAccount for runners in the default container mode, protected until the scale set
        # is deleted (its controller removes the finalizer then).
        await self.kube.create(
            resources.SERVICE_ACCOUNTS,
            {
                "metadata": {
                    "name": no_permission,
                    "namespace": self.namespace,
                    "finalizers": [keys.CLEANUP_PROTECTION_FINALIZER],
                }
            },
        )
        values_hash = hashlib.sha256(orjson.dumps({"name": name, "min": min_runners}, option=orjson.OPT_SORT_KEYS))
        spec_template = {
            **template,
            "spec": {**template.get("spec", {}), "serviceAccountName": no_permission},
        }
        ars = {
            "apiVersion": API_VERSION,
            "kind": "AutoscalingRunnerSet",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    "app.kubernetes.io/component": "autoscaling-runner-set",
                    "helm.sh/chart": f"{PART_OF_CHART}-{ARC_VERSION}",
                    "app.kubernetes.io/name": name,
                    "app.kubernetes.io/instance": name,
                    keys.LABEL_VERSION: ARC_VERSION,
                    "app.kubernetes.io/managed-by": "Helm",
                    keys.LABEL_PART_OF: PART_OF_CHART,
                    keys.LABEL_SCALE_SET_NAME: name,
                    keys.LABEL_SCALE_SET_NAMESPACE: self.namespace,
                    **self.url_labels,
                },
                "annotations": {
                    keys.ANNOTATION_VALUES_HASH: values_hash.hexdigest()[:63],
                    keys.ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING: f"{name}-gha-rs-manager",
                    keys.ANNOTATION_CLEANUP_MANAGER_ROLE_NAME: f"{name}-gha-rs-manager",
                    keys.ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME: no_permission,
                    keys.ANNOTATION_RUNNER_SCALE_SET_ID: str(scale_set.id),
                    keys.ANNOTATION_RUNNER_SCALE_SET_NAME: scale_set.name,
                    keys.ANNOTATION_RUNNER_GROUP_NAME: scale_set.runner_group_name or "Default",
                    keys.ANNOTATION_CHANGE_HASH: "6d4c9b7f8d",
                },
                "finalizers": [keys.AUTOSCALING_RUNNER_SET_FINALIZER],
            },
            # ARC's chart sets no runnerScaleSetName unless the values do; the controller defaults it in memory.
            "spec": {
                "githubConfigUrl": self.config_url,
                "githubConfigSecret": secret,
                "minRunners": min_runners,
                "maxRunners": max_runners,
                "template": spec_template,
            },
        }
        created = await self.kube.create(AUTOSCALING_RUNNER_SETS, ars, namespace=self.namespace)
        # ARC's last status write: counts copied from its newest set some time ago.
        stale = {
            "currentRunners": 7,
            "pendingEphemeralRunners": 0,
            "runningEphemeralRunners": 7,
            "failedEphemeralRunners": 0,
            "phase": "Running",
        }
        await self.kube.patch(
            AUTOSCALING_RUNNER_SETS, name, {"status": stale}, namespace=self.namespace, subresource="status"
        )
        installed = ArcScaleSet(namespace=self.namespace, name=name, scale_set_id=scale_set.id, listener="")
        installed.uids[f"AutoscalingRunnerSet/{name}"] = ObjectView(created).uid
        return installed

    @contextlib.asynccontextmanager
    async def before_patch_id(self) -> AsyncIterator[None]:
        """While the block runs, the EphemeralRunnerSet CRD requires no ``spec.patchID``, as ARC's before 0.9: sets
        made with ``add_runner_set(..., before_patch_id=True)`` have none, and their spec can be written without
        one. This version's CRD is in force again when the block ends, whatever happened."""
        current = custom_resource_definition(EphemeralRunnerSet)
        older = copy.deepcopy(current)
        for version in older["spec"]["versions"]:
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            spec["required"] = [name for name in spec.get("required", ()) if name != "patchID"]
        await install_crds(self.kube, [older])
        await eventually(lambda: self._patch_id_required(False), "the CRD to stop requiring spec.patchID")
        try:
            yield
        finally:
            await install_crds(self.kube, [current])
            await eventually(lambda: self._patch_id_required(True), "the CRD to require spec.patchID again")

    async def _patch_id_required(self, expected: bool) -> bool:
        """Whether the API server (as it serves the CRD now) refuses a set without ``spec.patchID``, is ``expected``."""
        runner_spec = {
            "githubConfigUrl": self.config_url,
            "githubConfigSecret": "probe",
            "runnerScaleSetId": 1,
            "spec": {"containers": [{"name": "runner", "image": "probe"}]},
        }
        body = {
            "apiVersion": API_VERSION,
            "kind": "EphemeralRunnerSet",
            "metadata": {"generateName": "probe-", "namespace": self.namespace},
            "spec": {"ephemeralRunnerSpec": runner_spec},
        }
        try:
            await self.kube.create(EPHEMERAL_RUNNER_SETS, body, namespace=self.namespace, dry_run=True)
        except Invalid as exc:
            return expected == ("patchID" in str(exc))
        return not expected

    async def strip_patch_id(self, runner_set: str) -> None:
        """Remove ``spec.patchID`` from ``runner_set`` (inside :meth:`before_patch_id`): ARC's listener before 0.9
        wrote ``replicas`` alone, and the process playing ARC's listener here wrote a patch ID too."""
        await self.kube.patch(
            EPHEMERAL_RUNNER_SETS,
            runner_set,
            [{"op": "remove", "path": "/spec/patchID"}],
            namespace=self.namespace,
            patch_type=PatchType.JSON,
        )

    async def add_runner_set(
        self, installed: ArcScaleSet, *, generated_name: bool = True, before_patch_id: bool = False
    ) -> str:
        """An EphemeralRunnerSet as ARC's ``newEphemeralRunnerSet`` builds it and its controller finalizes it;
        a later one is newer (ARC's current set), even when made within the same second as the previous.
        ``before_patch_id``: as ARC before 0.9 made it, without ``spec.patchID`` (inside :meth:`before_patch_id`)."""
        ars = await self.kube.get(AUTOSCALING_RUNNER_SETS, installed.name, namespace=self.namespace)
        ars_view = ObjectView(ars)
        if installed.runner_sets:
            # creationTimestamp has one-second resolution: ARC's "newest" must be unambiguous.
            previous = await self.kube.get(EPHEMERAL_RUNNER_SETS, installed.current_set, namespace=self.namespace)
            made = ObjectView(previous).creation_timestamp or dt.datetime.now(dt.UTC)
            await eventually(
                lambda: dt.datetime.now(dt.UTC) >= made + dt.timedelta(seconds=1.05),
                "the clock to pass the previous set's creation second",
                timeout=5,
            )
        labels = {
            **{k: v for k, v in ars_view.labels.items()},
            keys.LABEL_PART_OF: keys.PART_OF_SCALE_SET,
            keys.LABEL_COMPONENT: keys.COMPONENT_RUNNER_SET,
            keys.LABEL_VERSION: ars_view.labels[keys.LABEL_VERSION],
            keys.LABEL_SCALE_SET_NAME: installed.name,
            keys.LABEL_SCALE_SET_NAMESPACE: self.namespace,
            **self.url_labels,
        }
        spec = ars["spec"]
        meta: dict[str, Any] = {
            "namespace": self.namespace,
            "labels": labels,
            "annotations": {
                keys.ANNOTATION_RUNNER_GROUP_NAME: ars_view.annotation(keys.ANNOTATION_RUNNER_GROUP_NAME),
                keys.ANNOTATION_RUNNER_SCALE_SET_NAME: ars_view.annotation(keys.ANNOTATION_RUNNER_SCALE_SET_NAME),
                keys.ANNOTATION_RUNNER_SPEC_HASH: "75d6c9c8b",
            },
            "finalizers": [ARC_RUNNER_SET_FINALIZER],
            "ownerReferences": [_controller_ref(ars)],
        }
        if generated_name:
            meta["generateName"] = f"{installed.name}-"
        else:
            meta["name"] = installed.name
        body = {
            "apiVersion": API_VERSION,
            "kind": "EphemeralRunnerSet",
            "metadata": meta,
            "spec": {
                **({} if before_patch_id else {"patchID": 0}),
                "ephemeralRunnerSpec": {
                    "githubConfigUrl": spec["githubConfigUrl"],
                    "githubConfigSecret": spec["githubConfigSecret"],
                    "runnerScaleSetId": installed.scale_set_id,
                    # Go serialises the inlined PodTemplateSpec's ObjectMeta even when empty.
                    "metadata": spec["template"].get("metadata") or {},
                    "spec": spec["template"]["spec"],
                },
            },
        }
        created = await self.kube.create(EPHEMERAL_RUNNER_SETS, body, namespace=self.namespace)
        name = ObjectView(created).name
        installed.runner_sets.append(name)
        installed.runners[name] = []
        installed.uids[f"EphemeralRunnerSet/{name}"] = ObjectView(created).uid
        await self._write_set_status(installed, name)
        return name

    async def add_runners(self, installed: ArcScaleSet, runner_set: str, count: int) -> list[str]:
        """``count`` runners of ``runner_set``, registered and running (idle), as ARC's controllers leave them.
        Before there is a listener, the set's ``replicas`` follow (as a listener had asked for them); after,
        they are the listener's."""
        ers = await self.kube.get(EPHEMERAL_RUNNER_SETS, runner_set, namespace=self.namespace)
        names = await asyncio.gather(*(self._runner(installed, ers) for _ in range(count)))
        installed.runners[runner_set] += names
        if not installed.listener:
            await self.kube.patch(
                EPHEMERAL_RUNNER_SETS,
                runner_set,
                {"spec": {"replicas": len(installed.runners[runner_set])}},
                namespace=self.namespace,
            )
        await self._write_set_status(installed, runner_set)
        return list(names)

    async def add_listener(self, installed: ArcScaleSet, *, older_name: bool = False) -> str:
        """ARC's AutoscalingListener for the newest set, with its ServiceAccount, Role, RoleBinding, config
        Secret and pod; returns the listener's name. ``older_name``: as ARC 0.9.0 to 0.13.0 named it."""
        ars = await self.kube.get(AUTOSCALING_RUNNER_SETS, installed.name, namespace=self.namespace)
        ars_view = ObjectView(ars)
        spec = ars["spec"]
        if older_name:
            name = f"{installed.name}-{hash8(self.namespace)}-listener"
        else:
            name = autoscaling_listener_name(
                installed.name,
                namespace=self.namespace,
                runner_group=spec.get("runnerGroup", ""),
                github_config_url=spec["githubConfigUrl"],
            )
        ns = self.controller_namespace
        labels = {
            **ars_view.labels,
            keys.LABEL_SCALE_SET_NAMESPACE: self.namespace,
            keys.LABEL_SCALE_SET_NAME: installed.name,
            keys.LABEL_PART_OF: keys.PART_OF_SCALE_SET,
            keys.LABEL_COMPONENT: keys.COMPONENT_LISTENER,
            keys.LABEL_VERSION: ars_view.labels[keys.LABEL_VERSION],
            **self.url_labels,
        }
        listener = await self.kube.create(
            AUTOSCALING_LISTENERS,
            {
                "apiVersion": API_VERSION,
                "kind": "AutoscalingListener",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": labels,
                    "annotations": {
                        keys.ANNOTATION_RUNNER_SPEC_HASH: "5f8d7c6b9",
                        keys.ANNOTATION_VALUES_HASH: ars_view.annotation(keys.ANNOTATION_VALUES_HASH),
                    },
                    "finalizers": [keys.AUTOSCALING_LISTENER_FINALIZER],
                },
                "spec": {
                    "githubConfigUrl": spec["githubConfigUrl"],
                    "githubConfigSecret": spec["githubConfigSecret"],
                    "runnerScaleSetId": installed.scale_set_id,
                    "autoscalingRunnerSetNamespace": self.namespace,
                    "autoscalingRunnerSetName": installed.name,
                    "ephemeralRunnerSetName": installed.current_set,
                    "minRunners": spec.get("minRunners", 0),
                    "maxRunners": spec.get("maxRunners", 2147483647),
                    "image": ARC_CONTROLLER_IMAGE,
                },
            },
            namespace=ns,
        )
        owner = [_controller_ref(listener)]
        rbac_labels = {
            **labels,
            keys.LABEL_LISTENER_NAMESPACE: ns,
            keys.LABEL_LISTENER_NAME: name,
        }
        await self.kube.create(
            resources.SERVICE_ACCOUNTS,
            {
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {
                        keys.LABEL_SCALE_SET_NAMESPACE: self.namespace,
                        keys.LABEL_SCALE_SET_NAME: installed.name,
                    },
                    "ownerReferences": owner,
                }
            },
        )
        await self.kube.create(
            resources.ROLES,
            {
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "labels": {**rbac_labels, "role-policy-rules-hash": "7b5d8f9c6"},
                },
                "rules": [
                    {
                        "apiGroups": ["actions.github.com"],
                        "resources": ["ephemeralrunnersets"],
                        "resourceNames": [installed.current_set],
                        "verbs": ["patch"],
                    },
                    {
                        "apiGroups": ["actions.github.com"],
                        "resources": ["ephemeralrunners", "ephemeralrunners/status"],
                        "verbs": ["patch"],
                    },
                ],
            },
        )
        await self.kube.create(
            resources.ROLE_BINDINGS,
            {
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "labels": {
                        **rbac_labels,
                        "role-binding-role-ref-hash": "6c8b5d",
                        "role-binding-subject-hash": "9f7c4b",
                    },
                },
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "namespace": ns, "name": name}],
            },
        )
        # ARC 0.12+'s config.json (cmd/ghalistener/config): the credentials inline.
        config = {
            "configure_url": spec["githubConfigUrl"],
            "github_token": self.token,
            "ephemeral_runner_set_namespace": self.namespace,
            "ephemeral_runner_set_name": installed.current_set,
            "max_runners": spec.get("maxRunners", 2147483647),
            "min_runners": spec.get("minRunners", 0),
            "runner_scale_set_id": installed.scale_set_id,
            "log_level": "debug",
            "log_format": "text",
            "metrics_addr": "",
            "metrics_endpoint": "",
        }
        await self.kube.create(
            resources.SECRETS,
            {
                "metadata": {"name": f"{name}-config", "namespace": ns, "ownerReferences": owner},
                "data": {keys.LISTENER_CONFIG_SECRET_KEY: base64.b64encode(orjson.dumps(config)).decode()},
            },
        )
        pod = await self.kube.create(
            resources.PODS,
            {
                "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": owner},
                "spec": {
                    "serviceAccountName": name,
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 60,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": [
                        {
                            "name": keys.LISTENER_CONTAINER_NAME,
                            "image": ARC_CONTROLLER_IMAGE,
                            "command": ["/ghalistener"],
                            "env": [
                                {
                                    "name": "LISTENER_CONFIG_PATH",
                                    "value": f"{LISTENER_CONFIG_MOUNT}/{keys.LISTENER_CONFIG_SECRET_KEY}",
                                }
                            ],
                            "volumeMounts": [
                                {"name": "listener-config", "mountPath": LISTENER_CONFIG_MOUNT, "readOnly": True}
                            ],
                        }
                    ],
                    "volumes": [{"name": "listener-config", "secret": {"secretName": f"{name}-config"}}],
                },
            },
            namespace=ns,
        )
        installed.listener = name
        installed.uids[f"AutoscalingListener/{name}"] = ObjectView(listener).uid
        installed.uids[f"Pod/{name}"] = ObjectView(pod).uid
        return name

    # -- pieces -----------------------------------------------------------------------------------------

    def _client(self) -> ActionsClient:
        return ActionsClient(
            parse_config_url(self.config_url, environ={}),
            PersonalAccessToken(self.token),
            system_info=SystemInfo(subsystem="arc-install"),
        )

    async def _runner(self, installed: ArcScaleSet, ers: Mapping[str, Any]) -> str:
        """One EphemeralRunner as ARC's ``newEphemeralRunner`` builds it, then registered, its JIT Secret and
        pod created and its status written as ARC's EphemeralRunner controller does."""
        view = ObjectView(ers)
        labels = {**view.labels, keys.LABEL_COMPONENT: keys.COMPONENT_RUNNER}
        annotations = {**view.annotations, keys.ANNOTATION_PATCH_ID: str(ers["spec"].get("patchID", 0))}
        er = await self.kube.create(
            EPHEMERAL_RUNNERS,
            {
                "apiVersion": API_VERSION,
                "kind": "EphemeralRunner",
                "metadata": {
                    "generateName": f"{view.name}-runner-",
                    "namespace": self.namespace,
                    "labels": labels,
                    "annotations": annotations,
                    "finalizers": [keys.EPHEMERAL_RUNNER_FINALIZER, keys.EPHEMERAL_RUNNER_REGISTRATION_FINALIZER],
                    "ownerReferences": [_controller_ref(ers)],
                },
                "spec": ers["spec"]["ephemeralRunnerSpec"],
            },
            namespace=self.namespace,
        )
        name = ObjectView(er).name
        async with self._client() as client:
            jit = await client.generate_jit_runner_config(installed.scale_set_id, name=name)
        owner = [_controller_ref(er)]
        await self.kube.create(
            resources.SECRETS,
            {
                "metadata": {"name": name, "namespace": self.namespace, "ownerReferences": owner},
                "data": {
                    key: base64.b64encode(value.encode()).decode()
                    for key, value in (
                        ("jitToken", jit.encoded_jit_config),
                        ("runnerName", name),
                        ("runnerId", str(jit.runner.id)),
                    )
                },
            },
        )
        template = er["spec"]
        pod_spec = dict(template["spec"])
        containers = []
        for container in pod_spec["containers"]:
            if container.get("name") == keys.RUNNER_CONTAINER_NAME:
                env = [
                    *(container.get("env") or []),
                    {
                        "name": "ACTIONS_RUNNER_INPUT_JITCONFIG",
                        "valueFrom": {"secretKeyRef": {"name": name, "key": "jitToken"}},
                    },
                    {
                        "name": "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT",
                        "value": f"actions-runner-controller/{ARC_VERSION}",
                    },
                ]
                container = {**container, "env": env}
            containers.append(container)
        pod_spec["containers"] = containers
        await self.kube.create(
            resources.PODS,
            {
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "labels": {
                        **labels,
                        **((template.get("metadata") or {}).get("labels") or {}),
                        keys.LABEL_EPHEMERAL_RUNNER: keys.EPHEMERAL_RUNNER_LABEL_VALUE,
                    },
                    "ownerReferences": owner,
                },
                "spec": pod_spec,
            },
        )
        await self.kube.patch(
            EPHEMERAL_RUNNERS,
            name,
            {"status": {"runnerId": jit.runner.id, "runnerName": name, "phase": "Pending"}},
            namespace=self.namespace,
            subresource="status",
        )

        async def running() -> bool:
            pod = await self.kube.get(resources.PODS, name, namespace=self.namespace)
            return PodView(pod).phase == "Running"

        await eventually(running, f"runner pod {name} to run", timeout=60)
        await self.kube.patch(
            EPHEMERAL_RUNNERS,
            name,
            {"status": {"phase": "Running", "ready": True, "reason": "", "message": ""}},
            namespace=self.namespace,
            subresource="status",
        )
        installed.uids[f"EphemeralRunner/{name}"] = ObjectView(er).uid
        return name

    async def _write_set_status(self, installed: ArcScaleSet, runner_set: str) -> None:
        count = len(installed.runners.get(runner_set, []))
        # ARC 0.14's updateStatus, written when its runners last changed.
        status = {
            "currentReplicas": count,
            "pendingEphemeralRunners": 0,
            "runningEphemeralRunners": count,
            "failedEphemeralRunners": 0,
            "phase": "Running",
        }
        await self.kube.patch(
            EPHEMERAL_RUNNER_SETS, runner_set, {"status": status}, namespace=self.namespace, subresource="status"
        )


def _controller_ref(owner: Mapping[str, Any]) -> dict[str, Any]:
    view = ObjectView(owner)
    return {
        "apiVersion": view.api_version or API_VERSION,
        "kind": view.kind,
        "name": view.name,
        "uid": view.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _url_parts(config_url: str) -> tuple[str, str, str]:
    config = parse_config_url(config_url, environ={})
    return config.enterprise, config.organization, config.repository


def listener_session_key_names() -> Sequence[str]:
    """Annotations this project's listener writes on its set that ARC's never does (stripped by the tests
    when a process of this project plays ARC's listener)."""
    found = getattr(keys, "ANNOTATION_LISTENER_STATE", None)
    return (found,) if isinstance(found, str) else ()
