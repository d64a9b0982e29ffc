"""The controller chart renders ARC's Deployment for arc-scaleset: the flags and environment of ARC's chart,
accepted as they are by ``arc-scaleset controller``, and RBAC scoped as the values ask."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
import yaml

import arc_scaleset
from arc_scaleset.api.crd.installed import REQUIRED_FIELDS
from arc_scaleset.cmd.controller import configure, ignored_flag_warnings, settings_from_args
from arc_scaleset.controllers.settings import ControllerSettings
from arc_scaleset.controllers.vault_policy import parse_allow_list
from arc_scaleset_lab.harness.helm import Helm, HelmError
from tests.charts.paths import CONTROLLER_CHART, SCALE_SET_CHART

NAMESPACE = "arc-system"


async def render(helm: Helm, values: dict[str, Any] | None = None, release: str = "arc") -> list[dict[str, Any]]:
    return await helm.template(CONTROLLER_CHART, release, NAMESPACE, values)


def only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def kinds(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((o["kind"], o["metadata"]["name"]) for o in objects)


def manager(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def controller_settings(container: dict[str, Any]) -> tuple[argparse.Namespace, ControllerSettings]:
    """What ``arc-scaleset controller`` makes of the rendered container (its env resolved as a pod would)."""
    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(container["args"])
    environ = {e["name"]: e.get("value", NAMESPACE) for e in container["env"]}
    return args, settings_from_args(args, environ)


async def test_default_deployment_runs_the_controller_with_arcs_flags_and_the_image_for_listeners(helm: Helm) -> None:
    objects = await render(helm)
    deployment = only(objects, "Deployment")
    container = manager(deployment)
    image = f"ghcr.io/arc-scaleset/arc-scaleset:{arc_scaleset.__version__}"
    assert container["image"] == image
    assert container["command"] == ["arc-scaleset", "controller"]
    assert container["args"][0] == "--auto-scaling-runner-set-only"
    args, settings = controller_settings(container)
    assert ignored_flag_warnings(args) == [], "the chart passes no flag the controller ignores"
    assert settings.controller_image == image, "listeners run the controller's image"
    assert settings.controller_namespace == NAMESPACE
    assert (settings.log_level, settings.log_format, settings.runner_max_concurrent_reconciles) == ("debug", "text", 2)
    assert settings.metrics_enabled is False, "metrics are off unless the metrics value is set"
    assert settings.accept_any_version_label is False, "the version gate is on unless a value turns it off"
    assert args.enable_leader_election, "even one replica: a rolling upgrade runs two pods for a while"
    labels = deployment["metadata"]["labels"]
    assert labels["actions.github.com/controller-service-account-name"] == "arc-gha-rs-controller"
    assert labels["actions.github.com/controller-service-account-namespace"] == NAMESPACE
    assert deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gha-rs-controller"
    assert ("ClusterRole", "arc-gha-rs-controller") in kinds(objects)
    assert ("ServiceAccount", "arc-gha-rs-controller") in kinds(objects)
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    (crd_rule,) = [rule for rule in role["rules"] if "customresourcedefinitions" in rule["resources"]]
    assert crd_rule["verbs"] == ["get"], "only reading them, for the start-up check of the installed CRDs"
    assert sorted(crd_rule["resourceNames"]) == sorted(f"{plural}.actions.github.com" for plural in REQUIRED_FIELDS)


async def test_an_arc_controller_release_upgraded_to_this_chart_keeps_its_deployment_selector_and_names(
    helm: Helm,
) -> None:
    """docs/migration.md upgrades ARC's controller release in place. A Deployment's selector cannot change, and
    the scale sets' RoleBindings (made by ARC's chart) name the controller's ServiceAccount: both must be what
    ARC's chart renders for the same release and values -- selector ``name: gha-rs-controller`` (or
    ``nameOverride``), ``namespace``, ``instance``; full name ``<release>-<name>``, or the release name alone
    when it contains the name."""
    deployment = only(await render(helm), "Deployment")
    selector = {"app.kubernetes.io/name": "gha-rs-controller", "app.kubernetes.io/namespace": NAMESPACE,
                "app.kubernetes.io/instance": "arc"}  # fmt: skip
    assert deployment["spec"]["selector"]["matchLabels"] == selector
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    assert selector.items() <= deployment["metadata"]["labels"].items()

    cases = [
        ("arc-gha-rs-controller", {}, "arc-gha-rs-controller"),
        ("arc", {"nameOverride": "ctl"}, "arc-ctl"),
        ("arc", {"fullnameOverride": "controller"}, "controller"),
    ]
    for release, values, name in cases:
        objects = await render(helm, values, release=release)
        assert ("Deployment", name) in kinds(objects), (release, values)
        assert ("ServiceAccount", name) in kinds(objects), (release, values)
    overridden = only(await render(helm, {"nameOverride": "ctl"}), "Deployment")
    assert overridden["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "ctl"


async def test_leader_election_is_on_for_any_replica_count_named_after_the_release(helm: Helm) -> None:
    for replicas in (1, 2):
        container = manager(only(await render(helm, {"replicaCount": replicas}, release="prod"), "Deployment"))
        args, _ = controller_settings(container)
        assert args.enable_leader_election, replicas
        assert args.leader_election_id == "prod-gha-rs-controller"


async def test_the_runner_template_bound_reaches_the_controller(helm: Helm) -> None:
    deployment = only(await render(helm, {"flags": {"maxRunnerTemplateBytes": 131072}}), "Deployment")
    _, settings = controller_settings(manager(deployment))
    assert settings.max_runner_template_bytes == 131072


@pytest.mark.parametrize(("value", "expected"), [(None, True), (True, True), (False, False)])
async def test_cost_labels_are_on_by_default_and_the_value_turns_them_off(
    helm: Helm, value: bool | None, expected: bool
) -> None:
    values = {} if value is None else {"flags": {"runnerCostLabels": value}}
    _, settings = controller_settings(manager(only(await render(helm, values), "Deployment")))
    assert settings.runner_cost_labels is expected


@pytest.mark.parametrize(("value", "expected"), [(None, False), (True, True), (False, False)])
async def test_runner_counts_are_left_to_the_metrics_by_default_and_the_value_puts_them_in_status(
    helm: Helm, value: bool | None, expected: bool
) -> None:
    values = {} if value is None else {"flags": {"runnerCountsInStatus": value}}
    container = manager(only(await render(helm, values), "Deployment"))
    _, settings = controller_settings(container)
    assert settings.runner_counts_in_status is expected
    flags = [arg for arg in container["args"] if arg.startswith("--runner-counts-in-status")]
    assert flags == (["--runner-counts-in-status=true"] if expected else []), "the controller's default needs no flag"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, None),
        ({"flags": {"otlpEndpoint": "http://otel-collector.observability:4318"}},
         "http://otel-collector.observability:4318/v1/traces"),
        ({"env": [{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://collector:4318"}]},
         "http://collector:4318/v1/traces"),
    ],
)  # fmt: skip
async def test_traces_are_off_by_default_and_the_value_or_the_standard_variable_turns_them_on(
    helm: Helm, values: dict[str, Any], expected: str | None
) -> None:
    _, settings = controller_settings(manager(only(await render(helm, values), "Deployment")))
    assert settings.otlp_traces_endpoint == expected


async def test_metrics_health_probes_and_flags_values_reach_the_controller(helm: Helm) -> None:
    values = {
        "metrics": {"controllerManagerAddr": ":8080", "listenerAddr": ":8081", "listenerEndpoint": "/metrics"},
        "imagePullSecrets": [{"name": "regcred"}],
        "flags": {
            "logLevel": "info",
            "logFormat": "json",
            "runnerMaxConcurrentReconciles": 10,
            "scaleSetMaxConcurrentReconciles": 8,
            "sharedListenerMaxMembers": 200,
            "runnerPendingTimeout": "30m",
            "maxRunnersCeiling": 500,
            "vaultRefreshInterval": "5m",
            "excludeLabelPropagationPrefixes": ["argocd.argoproj.io/", "team/"],
            "k8sClientRateLimiterQPS": 50,
            "k8sClientRateLimiterBurst": 100,
            "rateLimiter": {"name": "typed_rate_limiter"},
            "healthProbeBindAddress": ":8082",
            "acceptAnyVersionLabel": True,
        },
    }
    deployment = only(await render(helm, values), "Deployment")
    container = manager(deployment)
    args, settings = controller_settings(container)
    assert settings.metrics_enabled
    assert settings.listener_metrics_addr == ":8081"
    assert settings.image_pull_secrets == ("regcred",), "listener pods get the pull secrets too"
    assert deployment["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert (settings.log_level, settings.log_format, settings.runner_max_concurrent_reconciles) == ("info", "json", 10)
    assert settings.scale_set_max_concurrent_reconciles == 8
    assert settings.shared_listener_max_members == 200
    assert settings.exclude_label_prefixes == ("argocd.argoproj.io/", "team/")
    assert settings.runner_pending_timeout == 1800
    assert settings.max_runners_ceiling == 500
    assert settings.vault_refresh_interval == 300
    assert (args.k8s_client_rate_limiter_qps, args.k8s_client_rate_limiter_burst) == (50, 100)
    assert args.workqueue_rate_limiter == "typed_rate_limiter"
    assert settings.accept_any_version_label
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"metrics": 8080, "health": 8082}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


async def test_the_vault_allow_list_is_off_by_default_and_when_on_names_the_configmap_the_chart_writes(
    helm: Helm,
) -> None:
    default = await render(helm)
    assert not any(arg.startswith("--vault-allow-list") for arg in manager(only(default, "Deployment"))["args"])
    assert not [o for o in default if o["kind"] == "ConfigMap"]

    grant = {
        "vaultUrls": ["https://team-a.vault.azure.net/"],
        "certificatePaths": ["/etc/arc/vault/team-a.pem"],
        "secretPrefixes": ["team-a-"],
        "githubHosts": ["github.com"],
    }
    objects = await render(helm, {"vaultAllowList": {"enabled": True, "namespaces": {"team-a": grant}}})
    _, settings = controller_settings(manager(only(objects, "Deployment")))
    config_map = only(objects, "ConfigMap")
    assert settings.vault_allow_list == config_map["metadata"]["name"] == "arc-gha-rs-controller-vault-allow-list"
    assert config_map["metadata"]["namespace"] == NAMESPACE
    allow_list = parse_allow_list(config_map["data"], source="chart")
    assert allow_list.broken == {}
    assert allow_list.grants["team-a"].secret_prefixes == ("team-a-",)

    # Enabled without entries: the admin manages the ConfigMap the flag names.
    managed = await render(helm, {"vaultAllowList": {"enabled": True, "name": "team-vaults"}})
    assert "--vault-allow-list=team-vaults" in manager(only(managed, "Deployment"))["args"]
    assert not [o for o in managed if o["kind"] == "ConfigMap"]


async def test_watching_one_namespace_grants_roles_there_and_in_the_controller_namespace_only(helm: Helm) -> None:
    objects = await render(helm, {"flags": {"watchSingleNamespace": "runners"}})
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    roles = {(o["metadata"]["name"], o["metadata"]["namespace"]) for o in objects if o["kind"] == "Role"}
    assert ("arc-gha-rs-controller-single-namespace-watch", "runners") in roles
    assert ("arc-gha-rs-controller-single-namespace", NAMESPACE) in roles
    _, settings = controller_settings(manager(only(objects, "Deployment")))
    assert settings.watch_namespace == "runners"
    deployment_labels = only(objects, "Deployment")["metadata"]["labels"]
    assert deployment_labels["actions.github.com/controller-watch-single-namespace"] == "runners"


async def test_an_existing_service_account_is_used_and_a_missing_name_is_refused(helm: Helm) -> None:
    objects = await render(helm, {"serviceAccount": {"create": False, "name": "mine"}})
    assert not [o for o in objects if o["kind"] == "ServiceAccount"]
    assert only(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "mine"
    with pytest.raises(HelmError, match=r"serviceAccount\.name is required"):
        await render(helm, {"serviceAccount": {"create": False}})


async def test_chart_version_gate_and_crds_match_this_build(helm: Helm) -> None:
    for chart in (CONTROLLER_CHART, SCALE_SET_CHART):
        app_version = yaml.safe_load((chart / "Chart.yaml").read_text())["appVersion"]
        assert app_version == arc_scaleset.__version__, f"{chart.name}: the ARS version label must pass the gate"
    crds = sorted(p.name for p in (CONTROLLER_CHART / "crds").iterdir())
    assert crds == [
        "actions.github.com_autoscalinglisteners.yaml",
        "actions.github.com_autoscalingrunnersets.yaml",
        "actions.github.com_ephemeralrunners.yaml",
        "actions.github.com_ephemeralrunnersets.yaml",
    ]


async def test_warm_capacity_gets_its_priority_class_and_a_closed_network_policy_and_can_be_turned_off(
    helm: Helm,
) -> None:
    objects = await render(helm)
    priority_class = only(objects, "PriorityClass")
    assert priority_class["metadata"]["name"] == "arc-gha-rs-controller-warm-placeholder"
    assert (priority_class["value"], priority_class["preemptionPolicy"], priority_class["globalDefault"]) == (
        -10,
        "Never",
        False,
    )
    _, settings = controller_settings(manager(only(objects, "Deployment")))
    assert settings.warm_capacity is True
    assert settings.warm_priority_class == "arc-gha-rs-controller-warm-placeholder"
    policy = only(objects, "NetworkPolicy")
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in policy["spec"]
    assert "egress" not in policy["spec"]
    assert policy["spec"]["podSelector"]["matchExpressions"] == [
        {"key": "arc-scaleset.dev/warm-pool", "operator": "Exists"}
    ]

    tuned = await render(
        helm,
        {"warmCapacity": {"priorityClass": {"create": False, "name": "mine"}, "placeholderMaxResources": "cpu=4",
                          "poolMaxPlaceholders": 7}},
    )  # fmt: skip
    assert not [o for o in tuned if o["kind"] == "PriorityClass"]
    _, settings = controller_settings(manager(only(tuned, "Deployment")))
    assert (settings.warm_priority_class, settings.warm_pool_max_placeholders) == ("mine", 7)
    assert set(settings.warm_placeholder_max_resources) == {"cpu"}

    off = await render(helm, {"warmCapacity": {"enabled": False}})
    assert not [o for o in off if o["kind"] in ("PriorityClass", "NetworkPolicy")]
    _, settings = controller_settings(manager(only(off, "Deployment")))
    assert settings.warm_capacity is False


async def test_capped_node_room_is_off_by_default_and_when_on_may_read_nodes_and_pods_cluster_wide(
    helm: Helm,
) -> None:
    objects = await render(helm)
    _, settings = controller_settings(manager(only(objects, "Deployment")))
    assert settings.capped_node_room is False
    assert not [o for o in objects if o["metadata"]["name"].endswith("-node-room")]

    on = await render(helm, {"cappedNodeRoom": {"enabled": True}})
    _, settings = controller_settings(manager(only(on, "Deployment")))
    assert settings.capped_node_room is True
    role = next(o for o in on if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-node-room"))
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]}]
    binding = next(o for o in on if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"].endswith("-node-room"))
    assert binding["subjects"][0]["namespace"] == NAMESPACE


async def test_prometheus_rules_are_a_plain_rules_file_in_a_config_map_when_enabled(helm: Helm) -> None:
    assert not [o for o in await render(helm) if o["kind"] == "ConfigMap"]

    objects = await render(helm, {"prometheusRules": {"enabled": True, "interval": "30s", "jobsWaitingFor": "3m"}})

    config_map = only(objects, "ConfigMap")
    assert config_map["metadata"]["namespace"] == NAMESPACE
    (group,) = yaml.safe_load(config_map["data"]["arc-scaleset.rules.yaml"])["groups"]
    assert group["interval"] == "30s"
    alerts = {rule["alert"]: rule for rule in group["rules"] if "alert" in rule}
    assert set(alerts) == {"ArcScaleSetListenerOffline", "ArcScaleSetJobsWaiting", "ArcScaleSetRunnersFailing"}
    assert alerts["ArcScaleSetJobsWaiting"]["for"] == "3m"
    assert alerts["ArcScaleSetListenerOffline"]["for"] == "5m"  # the default
    # Prometheus's own templates survive helm's: the annotations still name the alert's labels.
    assert "{{ $labels.name }}" in alerts["ArcScaleSetRunnersFailing"]["annotations"]["summary"]


def granted(objects: list[dict[str, Any]], namespace: str) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) the controller holds in ``namespace``: its Roles there and its ClusterRoles
    (no resourceNames: a grant of every object of the kind)."""
    rules = [
        rule
        for o in objects
        if o["kind"] == "ClusterRole" or (o["kind"] == "Role" and o["metadata"]["namespace"] == namespace)
        for rule in o.get("rules") or []
        if not rule.get("resourceNames")
    ]
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


@pytest.mark.parametrize("values", [None, {"flags": {"watchSingleNamespace": "runners"}}])
async def test_the_controller_may_make_a_standby_listeners_lease_and_grant_what_its_role_grants(
    helm: Helm, values: dict[str, Any] | None
) -> None:
    """RBAC lets the controller grant only what it holds (docs/listener.md, "Standby listener"): the standby Role's
    verbs on Leases and pods, and the Lease and Role it makes, in its own namespace."""
    held = granted(await render(helm, values), NAMESPACE)
    needed = {("coordination.k8s.io", "leases", v) for v in ("create", "delete", "get", "watch", "update")}
    needed |= {("", "pods", v) for v in ("get", "list", "watch")}
    needed |= {("rbac.authorization.k8s.io", kind, v) for kind in ("roles", "rolebindings") for v in ("create", "get")}
    assert needed <= held, needed - held
