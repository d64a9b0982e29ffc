"""The shared listener, controller side, on the real control plane: scale sets of one namespace with one credentials
Secret share one listener pod, ServiceAccount, config Secret and Role; another namespace never joins; a set that
changes credentials leaves without disturbing the others; the last member takes the group's objects with it."""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arc_scaleset.api.autoscalinglistener import AUTOSCALING_LISTENERS
from arc_scaleset.api.autoscalingrunnerset import AUTOSCALING_RUNNER_SETS
from arc_scaleset.api.ephemeralrunnerset import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.api.listener_group import (
    ANNOTATION_SHARED,
    GROUP_NAMESPACE_ENV,
    GROUP_SECRET_ENV,
    LABEL_GROUP,
    group_object_name,
)
from arc_scaleset.api.listener_group import group_of as group_of_spec  # beside the test's own group_of
from arc_scaleset.diagnose.snapshot import gather
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.conditions import get_condition
from arc_scaleset.kube.errors import NotFound
from arc_scaleset.kube.views import ObjectView
from arc_scaleset_lab.harness.waiting import eventually
from tests.integration.controllers.harness import ControllerHarness
from tests.integration.controllers.scale_set_env import (  # noqa: F401 - fixtures
    IMAGE,
    PAT,
    SECRET_NAME,
    EnvFactory,
    controller_namespace_fixture,
    sim_fixture,
    start_env_fixture,
)

pytestmark = pytest.mark.cluster

SETS = ("alpha", "beta", "gamma")


@pytest.fixture(name="team_b")
async def team_b_fixture(kube: KubeClient) -> AsyncIterator[str]:
    """Another team's namespace with a GitHub Secret of the same name; its scale sets are deleted by the test."""
    name = f"t-team-b-{uuid.uuid4().hex[:6]}"
    await kube.create(resources.NAMESPACES, {"metadata": {"name": name, "labels": {"arc-scaleset.dev/test": "true"}}})
    await kube.create(resources.SECRETS, {"metadata": {"name": SECRET_NAME}, "stringData": {"github_token": PAT}},
                      namespace=name)  # fmt: skip
    try:
        yield name
    finally:
        for resource in (AUTOSCALING_RUNNER_SETS, EPHEMERAL_RUNNER_SETS):
            for item in (await kube.list(resource, namespace=name)).items:
                with contextlib.suppress(NotFound):
                    await kube.patch(resource, item["metadata"]["name"], {"metadata": {"finalizers": None}},
                                     namespace=name)  # fmt: skip
        await kube.delete(resources.NAMESPACES, name, missing_ok=True)


def shared_body(env: ControllerHarness, name: str, **spec: Any) -> dict[str, Any]:
    body = env.ars_body(name, **spec)
    body["metadata"]["annotations"] = {ANNOTATION_SHARED: "true"}
    return body


async def create_shared(env: ControllerHarness, name: str, namespace: str | None = None, **spec: Any) -> None:
    await env.kube.create(AUTOSCALING_RUNNER_SETS, shared_body(env, name, **spec), namespace=namespace or env.namespace)


async def get(env: ControllerHarness, resource: resources.Resource, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return await env.kube.get(resource, name, namespace=namespace)
    except NotFound:
        return None


async def group_of(env: ControllerHarness, ars_name: str, namespace: str | None = None) -> str:
    """The group of a scale set's listener, once it has one."""

    async def labelled() -> str | None:
        for listener in await env.listeners():
            view = ObjectView(listener)
            if (view.spec.get("autoscalingRunnerSetName"), view.spec.get("autoscalingRunnerSetNamespace")) == (
                ars_name,
                namespace or env.namespace,
            ) and not view.is_deleting:
                return view.labels.get(LABEL_GROUP) or None
        return None

    group: str = await eventually(labelled, f"the listener of {ars_name} labelled with a group")
    return group


async def published(env: ControllerHarness, group: str, count: int) -> dict[str, str]:
    """The group's config Secret data once it holds exactly ``count`` keys."""

    async def keys() -> dict[str, str] | None:
        secret = await get(env, resources.SECRETS, group_object_name(group), env.controller_namespace)
        data = (secret or {}).get("data") or {}
        return dict(data) if len(data) == count else None

    data: dict[str, str] = await eventually(keys, f"{count} keys in the config Secret of group {group}", timeout=60)
    return data


async def group_pod(env: ControllerHarness, group: str) -> dict[str, Any]:
    pod: dict[str, Any] = await eventually(
        lambda: env.listener_pod(group_object_name(group)), f"the pod of group {group}", timeout=60
    )
    return pod


async def role_sets(env: ControllerHarness, group: str, namespace: str) -> list[str]:
    role = await get(env, resources.ROLES, group_object_name(group), namespace)
    return [] if role is None else list(role["rules"][0]["resourceNames"])


async def test_sets_of_one_namespace_and_secret_share_one_listener_and_another_namespace_never_joins(
    start_env: EnvFactory, team_b: str
) -> None:
    async with start_env(more_namespaces=(team_b,)) as env:
        for name in SETS:
            await create_shared(env, name)
        await create_shared(env, "delta", namespace=team_b)

        groups = {name: await group_of(env, name) for name in SETS}
        assert len(set(groups.values())) == 1, groups
        group = groups["alpha"]
        other = await group_of(env, "delta", team_b)
        assert other != group, "an equally named Secret in another namespace is another group"

        # One config Secret, one key per member: each that member's config.json for its own set.
        data = await published(env, group, len(SETS))
        configs = [ListenerConfig.from_json(base64.b64decode(value)) for value in data.values()]
        assert sorted(config.ephemeral_runner_set_name for config in configs) == sorted(SETS)
        assert {config.ephemeral_runner_set_namespace for config in configs} == {env.namespace}
        assert all(config.github_token == PAT for config in configs)

        # One pod, reading that Secret by name instead of a mounted file; no per-set pods.
        pod = await group_pod(env, group)
        container = pod["spec"]["containers"][0]
        env_vars = {item["name"]: item.get("value") for item in container["env"]}
        assert env_vars[GROUP_SECRET_ENV] == group_object_name(group)
        assert env_vars[GROUP_NAMESPACE_ENV] == env.controller_namespace
        assert "LISTENER_CONFIG_PATH" not in env_vars
        assert pod["spec"]["serviceAccountName"] == group_object_name(group)
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, "the per-set pod's hardening"
        await group_pod(env, other)
        pods = (await env.kube.list(resources.PODS, namespace=env.controller_namespace)).items
        assert {p["metadata"]["name"] for p in pods} == {group_object_name(group), group_object_name(other)}

        # One Role naming the three sets, bound to the group's ServiceAccount; one that reads the config Secret. The
        # group's pass writes the Role, the members' passes their keys: the last to join may be published first.
        await eventually(lambda: _role_names(env, group, list(SETS)), "the group's Role naming the three sets")
        binding = await get(env, resources.ROLE_BINDINGS, group_object_name(group), env.namespace)
        assert binding is not None
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": group_object_name(group), "namespace": env.controller_namespace}
        ]
        reader = await get(env, resources.ROLES, f"{group_object_name(group)}-config", env.controller_namespace)
        assert reader is not None
        assert reader["rules"][0]["resourceNames"] == [group_object_name(group)]
        assert await get(env, resources.SERVICE_ACCOUNTS, group_object_name(group), env.controller_namespace)

        # Team B's set has its own group: its own Role in its own namespace, its own one-key Secret.
        assert await role_sets(env, other, team_b) == ["delta"]
        assert len(await published(env, other, 1)) == 1

        # A member's status names the pod that serves it.
        listener_name = next(iter(data))

        async def ready_names_the_pod() -> dict[str, Any] | None:
            listener = await env.listener(listener_name)
            ready = get_condition(((listener or {}).get("status") or {}).get("conditions"), "Ready") or {}
            return ready if group_object_name(group) in ready.get("message", "") else None

        await eventually(ready_names_the_pod, "the member's Ready condition naming the group's pod")
        # status and explain show each member with the pod that serves it.
        for snapshot in await gather(env.kube, namespace=env.namespace, controller_namespace=env.controller_namespace):
            assert snapshot.listener_pod is not None
            assert ObjectView(snapshot.listener_pod).name == group_object_name(group)

        await env.kube.delete(AUTOSCALING_RUNNER_SETS, "delta", namespace=team_b)
        await eventually(
            lambda: _gone(env, resources.PODS, group_object_name(other), env.controller_namespace),
            "team B's group pod deleted with its only member",
        )


async def _role_names(env: ControllerHarness, group: str, sets: list[str]) -> bool:
    return sorted(await role_sets(env, group, env.namespace)) == sorted(sets)


async def _gone(env: ControllerHarness, resource: resources.Resource, name: str, namespace: str) -> bool:
    return await get(env, resource, name, namespace) is None


async def test_a_set_that_changes_credentials_leaves_and_the_others_keep_their_pod_and_sessions(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        await env.create_secret("gh-secret-2")
        for name in SETS:
            await create_shared(env, name)
        group = await group_of(env, "alpha")
        before = await published(env, group, len(SETS))
        pod = await group_pod(env, group)

        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "gamma", {"spec": {"githubConfigSecret": "gh-secret-2"}},
                             namespace=env.namespace)  # fmt: skip
        moved = await eventually(
            lambda: _group_changed(env, "gamma", group), "gamma's listener in another group", timeout=60
        )
        after = await published(env, group, len(SETS) - 1)
        assert after == {key: value for key, value in before.items() if key in after}, "the others' configs unchanged"
        assert await published(env, moved, 1)
        # Its key left in gamma's listener's pass, its Role rule goes in the group's: two controllers.
        await eventually(lambda: _role_names(env, group, ["alpha", "beta"]), "the group's Role naming alpha and beta")
        await group_pod(env, moved)
        still = await env.listener_pod(group_object_name(group))
        assert still is not None
        assert ObjectView(still).uid == ObjectView(pod).uid, "the others' pod was never recreated"

        # Opting out gives the set a listener of its own; the group's pod stays.
        await env.kube.patch(AUTOSCALING_RUNNER_SETS, "beta", {"metadata": {"annotations": {ANNOTATION_SHARED: None}}},
                             namespace=env.namespace)  # fmt: skip
        own_name = env.listener_name(await env.ars("beta"))
        await eventually(lambda: env.listener_pod(own_name), "beta's own listener pod", timeout=60)
        await published(env, group, 1)
        await eventually(lambda: _role_names(env, group, ["alpha"]), "the group's Role naming alpha alone")
        still = await env.listener_pod(group_object_name(group))
        assert still is not None
        assert ObjectView(still).uid == ObjectView(pod).uid


async def _group_changed(env: ControllerHarness, ars_name: str, group: str) -> str | None:
    for listener in await env.listeners():
        view = ObjectView(listener)
        label = view.labels.get(LABEL_GROUP)
        if view.spec.get("autoscalingRunnerSetName") == ars_name and label and label != group:
            return label
    return None


async def test_the_last_member_takes_the_groups_objects_with_it(start_env: EnvFactory) -> None:
    async with start_env() as env:
        for name in SETS[:2]:
            await create_shared(env, name)
        group = await group_of(env, "alpha")
        await published(env, group, 2)
        await group_pod(env, group)

        await env.kube.delete(AUTOSCALING_RUNNER_SETS, "alpha", namespace=env.namespace)
        await published(env, group, 1)
        # The leaving member removes its key and the group's pass its Role rule, in passes of two controllers.
        await eventually(
            lambda: _role_names(env, group, ["beta"]), "the group's Role naming the remaining set alone", timeout=30
        )
        assert await env.listener_pod(group_object_name(group)) is not None

        await env.kube.delete(AUTOSCALING_RUNNER_SETS, "beta", namespace=env.namespace)
        name, ns, ctl = group_object_name(group), env.namespace, env.controller_namespace
        for resource, object_name, namespace in (
            (resources.PODS, name, ctl),
            (resources.SECRETS, name, ctl),
            (resources.SERVICE_ACCOUNTS, name, ctl),
            (resources.ROLES, f"{name}-config", ctl),
            (resources.ROLE_BINDINGS, f"{name}-config", ctl),
            (resources.ROLES, name, ns),
            (resources.ROLE_BINDINGS, name, ns),
        ):
            await eventually(
                lambda r=resource, o=object_name, n=namespace: _gone(env, r, o, n),  # type: ignore[misc]
                f"{resource.kind} {namespace}/{object_name} deleted with the last member",
                timeout=60,
            )


async def test_a_shared_listener_whose_template_the_policy_refuses_gets_no_pod_and_no_config(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        template = {"spec": {"nodeName": "control-plane-1", "containers": [{"name": "listener"}]}}
        await create_shared(env, "alpha", listenerTemplate=template)
        group = await group_of(env, "alpha")

        async def refused() -> dict[str, Any] | None:
            for listener in await env.listeners():
                degraded = get_condition((listener.get("status") or {}).get("conditions"), "Degraded") or {}
                if degraded.get("reason") == "InvalidListenerTemplate":
                    return degraded
            return None

        await eventually(refused, "the member refused by the listenerTemplate policy")
        # The group's objects may exist (no credentials in them), but no key and no pod: nothing runs for it.
        secret = await get(env, resources.SECRETS, group_object_name(group), env.controller_namespace)
        assert not (secret or {}).get("data")
        assert await env.listener_pod(group_object_name(group)) is None


def alphas_group(env: ControllerHarness) -> str:
    """The group a shared scale set "alpha" of ``env`` will join, computed before it exists (to put an object in
    its way); the test checks it against the group it then joins."""
    spec = {"autoscalingRunnerSetNamespace": env.namespace, "githubConfigSecret": SECRET_NAME, "image": IMAGE}
    group = group_of_spec({ANNOTATION_SHARED: "true"}, spec)
    assert group is not None
    return group


async def test_a_foreign_object_under_a_group_name_is_left_untouched_and_named_on_the_members(
    start_env: EnvFactory,
) -> None:
    async with start_env() as env:
        group = alphas_group(env)
        name = group_object_name(group)
        foreign = await env.kube.create(
            resources.SERVICE_ACCOUNTS, {"metadata": {"name": name}}, namespace=env.controller_namespace
        )
        await create_shared(env, "alpha")
        assert await group_of(env, "alpha") == group, "the group the test computed"

        async def warned() -> bool:
            for listener in await env.listeners():
                reasons = await env.event_reasons(
                    regarding=listener["metadata"]["name"], namespace=env.controller_namespace
                )
                if "ObjectInTheWay" in reasons:
                    return True
            return False

        await eventually(warned, "an ObjectInTheWay Event on the member")
        live = await get(env, resources.SERVICE_ACCOUNTS, name, env.controller_namespace)
        assert live is not None
        assert ObjectView(live).resource_version == ObjectView(foreign).resource_version, "left untouched"
        assert await env.listener_pod(name) is None


async def test_a_binding_under_the_group_name_to_another_role_is_left_untouched_and_its_role_never_granted(
    start_env: EnvFactory,
) -> None:
    # A team pre-creates, in its own namespace, a RoleBinding under the group's name, with the group's label but
    # bound to a Role of its choosing: replacing its subjects would grant that Role to the group's listener.
    async with start_env() as env:
        group = alphas_group(env)
        name = group_object_name(group)
        rules = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]
        await env.kube.create(resources.ROLES, {"metadata": {"name": "team-chosen"}, "rules": rules},
                              namespace=env.namespace)  # fmt: skip
        foreign = await env.kube.create(
            resources.ROLE_BINDINGS,
            {
                "metadata": {"name": name, "labels": {LABEL_GROUP: group}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team-chosen"},
                "subjects": [{"kind": "ServiceAccount", "name": "team-own", "namespace": env.namespace}],
            },
            namespace=env.namespace,
        )
        await create_shared(env, "alpha")
        assert await group_of(env, "alpha") == group, "the group the test computed"

        async def warned() -> str | None:
            for listener in await env.listeners():
                for event in await env.events(
                    regarding=listener["metadata"]["name"], namespace=env.controller_namespace
                ):
                    if event.get("reason") == "ObjectInTheWay" and "cannot be changed" in event.get("note", ""):
                        return str(event["note"])
            return None

        note = await eventually(warned, "an ObjectInTheWay Event naming the binding's Role on the member")
        assert "'team-chosen'" in note
        live = await get(env, resources.ROLE_BINDINGS, name, env.namespace)
        assert live is not None
        assert ObjectView(live).resource_version == ObjectView(foreign).resource_version, "left untouched"
        assert all(subject.get("name") != name for subject in live["subjects"]), "the group's listener not bound"


async def test_a_groups_config_secret_its_sets_label_shareable_is_never_shared_with_another_team(
    start_env: EnvFactory, team_b: str
) -> None:
    # listenerConfigSecretMetadata labels the group's config Secret, which holds every member's credentials and has
    # no owner (it outlives any member): a label its sets chose must not let another team's template mount it, as
    # for a listener's own config Secret.
    shareable = "actions.github.com/listener-shareable"
    async with start_env(more_namespaces=(team_b,)) as env:
        await create_shared(env, "alpha", listenerConfigSecretMetadata={"labels": {shareable: "true"}})
        group = await group_of(env, "alpha")
        await published(env, group, 1)
        offered = group_object_name(group)
        live = await get(env, resources.SECRETS, offered, env.controller_namespace)
        assert live is not None
        assert live["metadata"]["labels"][shareable] == "true"

        template = {
            "spec": {
                "containers": [{"name": "listener", "volumeMounts": [{"name": "loot", "mountPath": "/loot"}]}],
                "volumes": [{"name": "loot", "secret": {"secretName": offered}}],
            }
        }
        thief = env.ars_body("thief", listenerTemplate=template)
        thief["metadata"]["namespace"] = team_b
        await env.kube.create(AUTOSCALING_RUNNER_SETS, thief, namespace=team_b)
        name = env.listener_name(thief)

        async def refused() -> dict[str, Any] | None:
            listener = await get(env, AUTOSCALING_LISTENERS, name, env.controller_namespace)
            found = get_condition(((listener or {}).get("status") or {}).get("conditions"), "Degraded") or {}
            return found if found.get("reason") == "InvalidListenerTemplate" else None

        message = (await eventually(refused, "the other team's template refused"))["message"]
        assert f"listenerTemplate.spec.volumes[0].secret.secretName: Secret {offered!r}" in message
        assert await env.listener_pod(name) is None
