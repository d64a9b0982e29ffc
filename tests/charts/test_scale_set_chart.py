"""The scale-set chart renders ARC's AutoscalingRunnerSet and companions from ARC's values, refuses values
that cannot work with a message naming them, and adds what each container mode needs to the runner pod."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import arc_scaleset
from arc_scaleset.api.autoscalingrunnerset import AutoscalingRunnerSet
from arc_scaleset_lab.harness.helm import Helm, HelmError
from tests.charts.paths import SCALE_SET_CHART

NAMESPACE = "runners"
BASE: dict[str, Any] = {
    "githubConfigUrl": "https://github.com/my-org/",
    "githubConfigSecret": {"github_token": "ghp_chart_test"},
    "controllerServiceAccount": {"namespace": "arc-system", "name": "arc-gha-rs-controller"},
}


async def render(helm: Helm, **values: Any) -> list[dict[str, Any]]:
    return await helm.template(SCALE_SET_CHART, "my-set", NAMESPACE, {**BASE, **values})


def only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def runner_of(ars: dict[str, Any]) -> dict[str, Any]:
    (runner,) = [c for c in ars["spec"]["template"]["spec"]["containers"] if c["name"] == "runner"]
    return runner


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def runner_template(
    *, sidecars: tuple[dict[str, Any], ...] = (), volumes: list[Any] | None = None, **runner: Any
) -> dict[str, Any]:
    """A pod template with ARC's runner container (with ``runner``'s fields), then ``sidecars``, and ``volumes``."""
    containers = [{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest", **runner}, *sidecars]
    return {"spec": {"containers": containers, **({"volumes": volumes} if volumes is not None else {})}}


async def test_token_values_make_a_protected_secret_named_by_a_valid_scale_set(helm: Helm) -> None:
    objects = await render(helm, minRunners=1, maxRunners=5, runnerGroup="ci", scaleSetLabels=["linux", "x64"])
    ars = only(objects, "AutoscalingRunnerSet")
    AutoscalingRunnerSet.model_validate(ars)  # the CRD types accept what the chart renders
    spec = ars["spec"]
    assert spec["githubConfigUrl"] == "https://github.com/my-org", "the trailing slash is trimmed"
    assert (spec["minRunners"], spec["maxRunners"], spec["runnerGroup"]) == (1, 5, "ci")
    assert spec["runnerScaleSetLabels"] == ["linux", "x64"]
    secret = only(objects, "Secret")
    assert spec["githubConfigSecret"] == secret["metadata"]["name"] == "my-set-gha-rs-github-secret"
    assert secret["metadata"]["finalizers"] == ["actions.github.com/cleanup-protection"]
    annotations = ars["metadata"]["annotations"]
    assert annotations["actions.github.com/cleanup-github-secret-name"] == secret["metadata"]["name"]
    assert annotations["actions.github.com/cleanup-manager-role-name"] == "my-set-gha-rs-manager"
    assert len(annotations["actions.github.com/values-hash"]) == 63
    labels = ars["metadata"]["labels"]
    assert labels["app.kubernetes.io/version"] == arc_scaleset.__version__, "the version gate must pass"
    assert labels["app.kubernetes.io/component"] == "autoscaling-runner-set"
    binding = only(objects, "RoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "namespace": "arc-system", "name": "arc-gha-rs-controller"}
    ]
    runner_pod = spec["template"]["spec"]
    assert runner_pod["restartPolicy"] == "Never"
    assert runner_pod["serviceAccountName"] == "my-set-gha-rs-no-permission", "runners get no permissions"


async def test_an_existing_secret_is_named_as_is_and_no_secret_is_made(helm: Helm) -> None:
    objects = await render(helm, githubConfigSecret="org-credentials")
    assert only(objects, "AutoscalingRunnerSet")["spec"]["githubConfigSecret"] == "org-credentials"
    assert not [o for o in objects if o["kind"] == "Secret"]
    assert (
        "actions.github.com/cleanup-github-secret-name"
        not in only(objects, "AutoscalingRunnerSet")["metadata"]["annotations"]
    )


async def test_app_credentials_go_into_the_secret_under_arcs_keys(helm: Helm) -> None:
    app = {"github_app_id": "123", "github_app_installation_id": "456", "github_app_private_key": "KEY"}
    secret = only(await render(helm, githubConfigSecret=app), "Secret")
    assert set(secret["data"]) == set(app)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"githubConfigUrl": ""}, "githubConfigUrl is required"),
        ({"githubConfigUrl": "github.com/my-org"}, "must start with https://"),
        ({"minRunners": 5, "maxRunners": 2}, "minRunners (5) must not be greater than maxRunners (2)"),
        ({"minRunners": -1}, "minRunners must be a whole number"),
        ({"maxRunners": 1.5}, "maxRunners must be a whole number"),
        ({"githubConfigSecret": {"github_token": ""}}, "githubConfigSecret needs github_token"),
        ({"githubConfigSecret": {"github_app_id": "1"}}, "a GitHub App needs all of"),
        ({"containerMode": {"type": "docker"}}, 'containerMode.type "docker" is not supported'),
        ({"containerMode": {"type": "kubernetes"}}, "kubernetesModeWorkVolumeClaim is required"),
        ({"runnerScaleSetName": "x" * 46}, "longer than 45 characters"),
        ({"template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}}, 'container named "runner"'),
        ({"proxy": {"http": {"url": "proxy:3128"}}}, "proxy.http.url must be an http:// or https:// URL"),
        ({"scaleSetLabels": [""]}, "scaleSetLabels"),
        ({"controllerServiceAccount": None}, "set controllerServiceAccount.namespace"),
    ],
)
async def test_values_that_cannot_work_are_refused_with_a_message_naming_them(
    helm: Helm, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(HelmError) as refused:
        await render(helm, **values)
    assert message in str(refused.value)
    assert "ghp_chart_test" not in str(refused.value), "the token never appears in an error"


async def test_dind_mode_runs_docker_as_a_native_sidecar_sharing_the_socket_with_the_runner(helm: Helm) -> None:
    ars = only(await render(helm, containerMode={"type": "dind"}), "AutoscalingRunnerSet")
    pod = ars["spec"]["template"]["spec"]
    init = {c["name"]: c for c in pod["initContainers"]}
    assert init["dind"]["restartPolicy"] == "Always", "a native sidecar on Kubernetes >= 1.29"
    assert init["dind"]["securityContext"]["privileged"] is True
    assert init["init-dind-externals"]["image"] == runner_of(ars)["image"]
    assert env_of(runner_of(ars))["DOCKER_HOST"] == "unix:///var/run/docker.sock"
    mounts = {m["name"]: m["mountPath"] for m in runner_of(ars)["volumeMounts"]}
    assert mounts == {"work": "/home/runner/_work", "dind-sock": "/var/run"}
    assert {v["name"] for v in pod["volumes"]} == {"work", "dind-sock", "dind-externals"}


async def test_kubernetes_mode_gives_runners_the_hooks_a_work_claim_and_their_own_permissions(helm: Helm) -> None:
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    objects = await render(helm, containerMode={"type": "kubernetes", "kubernetesModeWorkVolumeClaim": claim})
    ars = only(objects, "AutoscalingRunnerSet")
    env = env_of(runner_of(ars))
    assert env["ACTIONS_RUNNER_CONTAINER_HOOKS"] == "/home/runner/k8s/index.js"
    assert env["ACTIONS_RUNNER_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    (work,) = ars["spec"]["template"]["spec"]["volumes"]
    assert work["ephemeral"]["volumeClaimTemplate"]["spec"] == claim
    assert ars["spec"]["template"]["spec"]["serviceAccountName"] == "my-set-gha-rs-kube-mode"
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {("ServiceAccount", "my-set-gha-rs-kube-mode"), ("Role", "my-set-gha-rs-kube-mode")} <= names
    annotations = ars["metadata"]["annotations"]
    assert annotations["actions.github.com/cleanup-kubernetes-mode-role-name"] == "my-set-gha-rs-kube-mode"


@pytest.mark.parametrize("mode", ["kubernetes", "kubernetes-novolume", "dind"])
async def test_a_service_account_the_user_names_is_the_runners_and_the_chart_makes_none(helm: Helm, mode: str) -> None:
    """As ARC's chart: no kube-mode ServiceAccount and Role (pod exec, Secrets) left unused beside the user's."""
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    template = {"spec": {**runner_template()["spec"], "serviceAccountName": "team-runners"}}
    values = {"containerMode": {"type": mode, "kubernetesModeWorkVolumeClaim": claim}, "template": template}
    objects = await render(helm, **values)
    ars = only(objects, "AutoscalingRunnerSet")
    assert ars["spec"]["template"]["spec"]["serviceAccountName"] == "team-runners"
    assert not [o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"]
    for kind in ("Role", "RoleBinding"):
        assert [o["metadata"]["name"] for o in objects if o["kind"] == kind] == ["my-set-gha-rs-manager"], kind
    assert not [key for key in ars["metadata"]["annotations"] if "kubernetes-mode" in key or "no-permission" in key]


async def test_the_users_env_wins_over_what_a_mode_adds(helm: Helm) -> None:
    template = runner_template(env=[{"name": "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS", "value": "300"}])
    ars = only(await render(helm, containerMode={"type": "dind"}, template=template), "AutoscalingRunnerSet")
    env = runner_of(ars)["env"]
    assert [e["value"] for e in env if e["name"] == "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS"] == ["300"]


async def test_user_labels_and_annotations_are_added_but_never_replace_the_charts_or_controllers(helm: Helm) -> None:
    labels = {"team": "ci", "app.kubernetes.io/name": "mine", "actions.github.com/scale-set-name": "other"}
    ars = only(await render(helm, labels=labels, annotations={"owner": "me"}), "AutoscalingRunnerSet")
    meta = ars["metadata"]
    assert meta["labels"]["team"] == "ci"
    assert meta["labels"]["app.kubernetes.io/name"] == "my-set"
    assert meta["labels"]["actions.github.com/scale-set-name"] == "my-set"
    assert meta["annotations"]["owner"] == "me"


async def test_resource_meta_reaches_the_objects_the_controller_makes(helm: Helm) -> None:
    meta = {"labels": {"cost-center": "42"}, "annotations": {"note": "x"}}
    ars = only(
        await render(helm, resourceMeta={"ephemeralRunner": meta, "autoscalingListener": meta}), "AutoscalingRunnerSet"
    )
    assert ars["spec"]["ephemeralRunnerMetadata"] == meta
    assert ars["spec"]["autoscalingListener"] == meta
    AutoscalingRunnerSet.model_validate(ars)


async def test_github_server_tls_is_mounted_into_runners_and_referenced_by_the_set(helm: Helm) -> None:
    tls = {
        "certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "ca.crt"}},
        "runnerMountPath": "/usr/local/share/ca-certificates/",
    }
    objects = await render(helm, githubServerTLS=tls)
    ars = only(objects, "AutoscalingRunnerSet")
    assert ars["spec"]["githubServerTLS"] == {"certificateFrom": tls["certificateFrom"]}
    env = env_of(runner_of(ars))
    assert env["NODE_EXTRA_CA_CERTS"] == "/usr/local/share/ca-certificates/ca.crt"
    (volume,) = ars["spec"]["template"]["spec"]["volumes"]
    assert volume["configMap"]["name"] == "ca"
    role = only(objects, "Role")
    watched = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
    assert watched in role["rules"], "the CA ConfigMap is read, and watched through one watch of the namespace"


async def test_the_controller_may_watch_the_secrets_of_the_namespace_and_configmaps_only_with_a_ca(
    helm: Helm,
) -> None:
    # One metadata-only watch per namespace and kind (issue 26, item 9), not one per object by name.
    proxy = {"http": {"url": "http://proxy:3128", "credentialSecretRef": "proxy-auth"},
             "https": {"url": "http://proxy:3128"}}  # fmt: skip
    role = only(await render(helm, proxy=proxy), "Role")
    watched = [rule for rule in role["rules"] if "watch" in rule["verbs"]]
    assert watched == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["watch"]}]
    listed = [rule for rule in role["rules"] if "list" in rule["verbs"]]
    assert [rule["resources"] for rule in listed] == [["secrets", "serviceaccounts"]]


def volume_names(pod: dict[str, Any]) -> list[str]:
    return [v["name"] for v in pod.get("volumes") or []]


def container_names(pod: dict[str, Any], key: str) -> list[str]:
    return [c["name"] for c in pod.get(key) or []]


async def test_a_work_volume_mounts_and_a_dind_container_the_user_supplies_replace_what_dind_mode_adds(
    helm: Helm,
) -> None:
    tls = {"certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "ca.crt"}}, "runnerMountPath": "/certs"}
    work = {
        "name": "work",
        "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "9Gi"}}}}},
    }
    mounts = [
        {"name": "work", "mountPath": "/home/runner/_work"},
        {"name": "dind-sock", "mountPath": "/var/run"},
        {"name": "github-server-tls-cert", "mountPath": "/certs/ca.crt", "subPath": "ca.crt"},
    ]
    template = runner_template(
        volumeMounts=mounts, sidecars=({"name": "dind", "image": "my-own/dind"},), volumes=[work]
    )
    values = {"containerMode": {"type": "dind"}, "template": template, "githubServerTLS": tls}
    ars = only(await render(helm, **values), "AutoscalingRunnerSet")
    pod = ars["spec"]["template"]["spec"]
    paths = [m["mountPath"] for m in runner_of(ars)["volumeMounts"]]
    assert sorted(paths) == sorted(set(paths)) == ["/certs/ca.crt", "/home/runner/_work", "/var/run"]
    names = container_names(pod, "initContainers") + container_names(pod, "containers")
    assert names.count("dind") == 1, "one dind container: the chart's, as in ARC's chart"
    assert volume_names(pod).count("work") == 1
    assert [v for v in pod["volumes"] if v["name"] == "work"] == [work], "the user's work volume is used"


async def test_kubernetes_mode_uses_the_users_work_volume_and_then_needs_no_claim(helm: Helm) -> None:
    work = {"name": "work", "persistentVolumeClaim": {"claimName": "shared-work"}}
    template = runner_template(volumeMounts=[{"name": "work", "mountPath": "/home/runner/_work"}], volumes=[work])
    ars = only(await render(helm, containerMode={"type": "kubernetes"}, template=template), "AutoscalingRunnerSet")
    pod = ars["spec"]["template"]["spec"]
    assert pod["volumes"] == [work]
    assert runner_of(ars)["volumeMounts"] == [{"name": "work", "mountPath": "/home/runner/_work"}]


ORDER_TEMPLATE: dict[str, Any] = {
    "spec": {
        "initContainers": [{"name": "prepull", "image": "docker:cli"}],
        "containers": [
            {"name": "sidecar", "image": "busybox"},
            {"name": "runner", "image": "ghcr.io/actions/actions-runner:latest"},
        ],
        "volumes": [
            {"name": "cache", "emptyDir": {}},
            {"name": "work", "emptyDir": {"medium": "Memory"}},
            {"name": "tools", "emptyDir": {}},
        ],
    }
}
ORDER_TLS = {"certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "ca.crt"}}, "runnerMountPath": "/certs"}
CLAIM = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


@pytest.mark.parametrize(
    ("values", "init_containers", "containers", "volumes"),
    [
        (
            {"containerMode": {"type": "dind"}},
            ["init-dind-externals", "dind", "prepull"],
            ["runner", "sidecar"],
            ["dind-sock", "dind-externals", "work", "cache", "tools"],
        ),
        (
            {
                "containerMode": {"type": "kubernetes", "kubernetesModeWorkVolumeClaim": CLAIM},
                "githubServerTLS": ORDER_TLS,
            },
            ["prepull"],
            ["runner", "sidecar"],
            ["github-server-tls-cert", "work", "cache", "tools"],
        ),
    ],
    ids=["dind", "kubernetes-with-tls"],
)
async def test_an_arc_release_switched_to_this_chart_keeps_its_runner_pod_in_arcs_order(
    helm: Helm, values: dict[str, Any], init_containers: list[str], containers: list[str], volumes: list[str]
) -> None:
    """ARC's chart puts the mode's init containers before the user's (so they run with docker up) and its own
    volumes first; the same order here renders an equal runner spec, so no runner is replaced by the switch."""
    ars = only(await render(helm, template=ORDER_TEMPLATE, **values), "AutoscalingRunnerSet")
    pod = ars["spec"]["template"]["spec"]
    assert container_names(pod, "initContainers") == init_containers
    assert container_names(pod, "containers") == containers
    assert volume_names(pod) == volumes


PROBE_TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: probe
data:
  serviceAccount: {{ include "gha-rs.resolvedControllerServiceAccount" (dict "given" (.Values.given | default dict)
    "deployments" (.Values.deployments | default list) "namespace" .Release.Namespace) | quote }}
"""


@pytest.fixture
def discovery_chart(tmp_path: Path) -> Path:
    """A chart that runs the scale-set chart's own ServiceAccount resolution on Deployments given as values
    (`lookup` answers nothing under `helm template`)."""
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.0.0\n")
    shutil.copy(SCALE_SET_CHART / "templates" / "_helpers.tpl", chart / "templates" / "_helpers.tpl")
    (chart / "templates" / "probe.yaml").write_text(PROBE_TEMPLATE)
    return chart


def controller(namespace: str, *, watches: str | None = None) -> dict[str, Any]:
    labels = {
        "app.kubernetes.io/part-of": "gha-rs-controller",
        "actions.github.com/controller-service-account-namespace": namespace,
        "actions.github.com/controller-service-account-name": f"{namespace}-gha-rs-controller",
    }
    if watches is not None:
        labels["actions.github.com/controller-watch-single-namespace"] = watches
    return {"metadata": {"name": "arc-gha-rs-controller", "namespace": namespace, "labels": labels}}


async def discovered(helm: Helm, chart: Path, deployments: list[dict[str, Any]], given: dict[str, str]) -> str:
    objects = await helm.template(chart, "my-set", NAMESPACE, {"deployments": deployments, "given": given})
    return str(only(objects, "ConfigMap")["data"]["serviceAccount"])


@pytest.mark.parametrize(
    ("deployments", "given", "expected"),
    [
        ([controller("arc-system")], {}, "arc-system/arc-system-gha-rs-controller"),
        (
            [controller("team-a", watches="team-a-runners"), controller("team-b", watches=NAMESPACE)],
            {},
            "team-b/team-b-gha-rs-controller",
        ),
        ([controller("arc-system")], {"name": "custom-sa"}, "arc-system/custom-sa"),
        ([controller("arc-system")], {"namespace": "elsewhere"}, "elsewhere/arc-system-gha-rs-controller"),
        ([controller("a"), controller("b")], {"namespace": "arc", "name": "sa"}, "arc/sa"),
    ],
    ids=["one-cluster-wide", "the-single-namespace-one-watching-here", "name-alone", "namespace-alone", "both-given"],
)
async def test_the_controller_granted_the_namespace_is_the_one_arc_would_find(
    helm: Helm, discovery_chart: Path, deployments: list[dict[str, Any]], given: dict[str, str], expected: str
) -> None:
    assert await discovered(helm, discovery_chart, deployments, given) == expected


@pytest.mark.parametrize(
    ("deployments", "message"),
    [
        ([], "found 0 gha-rs-controller Deployments"),
        ([controller("a"), controller("b")], "found 2 gha-rs-controller Deployments"),
        ([controller("a"), controller("b", watches=NAMESPACE)], "1 cluster-wide and 1 single-namespace"),
        ([controller("a", watches="other")], 'watches namespace "runners"'),
        ([controller("a", watches=NAMESPACE), controller("b", watches=NAMESPACE)], "found 2 gha-rs-controller"),
    ],
    ids=["none", "two-cluster-wide", "mixed", "none-watching-here", "two-watching-here"],
)
async def test_an_unclear_controller_is_refused_with_a_message_saying_what_to_set(
    helm: Helm, discovery_chart: Path, deployments: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(HelmError) as refused:
        await discovered(helm, discovery_chart, deployments, {})
    assert message in str(refused.value)
    assert "set controllerServiceAccount.namespace and controllerServiceAccount.name" in str(refused.value)


async def test_shared_listener_is_off_by_default_and_the_value_sets_the_annotation(helm: Helm) -> None:
    annotation = "listener.arc-scaleset.dev/shared"
    default = only(await render(helm), "AutoscalingRunnerSet")
    assert annotation not in default["metadata"]["annotations"]
    shared = only(await render(helm, sharedListener=True), "AutoscalingRunnerSet")
    assert shared["metadata"]["annotations"][annotation] == "true"


async def test_listener_standby_is_off_by_default_and_the_value_sets_the_annotation(helm: Helm) -> None:
    annotation = "listener.arc-scaleset.dev/standby"
    default = only(await render(helm), "AutoscalingRunnerSet")
    assert annotation not in default["metadata"]["annotations"]
    standby = only(await render(helm, listenerStandby=True), "AutoscalingRunnerSet")
    assert standby["metadata"]["annotations"][annotation] == "true"
