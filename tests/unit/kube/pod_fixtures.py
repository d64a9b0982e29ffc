"""Realistic pod specs for the semantic-equality tests and ``bench/bench_semantic.py``.

``listener_pod_spec_desired()`` is a listener pod spec as the AutoscalingListener controller builds it;
``listener_pod_spec_live()`` is the same pod as the API server returns it after defaulting and admission
(dnsPolicy, schedulerName, terminationMessagePath/Policy, imagePullPolicy, ``protocol: TCP``, the default
not-ready/unreachable tolerations, ``securityContext: {}``, secret ``defaultMode``, the projected
``kube-api-access-*`` volume and its mount appended, canonical quantities). Each call returns fresh
objects, so a test may mutate what it gets.
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]


def listener_pod_spec_desired() -> JSON:
    return {
        "serviceAccountName": "arc-runners-754b578d-listener",
        "restartPolicy": "Never",
        "imagePullSecrets": [{"name": "ghcr-pull"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "arc", "operator": "Equal", "value": "listener", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "listener",
                "image": "ghcr.io/actions/gha-runner-scale-set-controller:0.14.2",
                "command": ["/ghalistener"],
                "env": [
                    {"name": "LISTENER_CONFIG_PATH", "value": "/etc/gha-listener/config.json"},
                    {
                        "name": "POD_NAME",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                    },
                ],
                "ports": [{"containerPort": 8080, "name": "metrics"}],
                "resources": {
                    "limits": {"cpu": "0.5", "memory": "256Mi"},
                    "requests": {"cpu": "0.1", "memory": "64Mi"},
                },
                "volumeMounts": [{"name": "listener-config", "mountPath": "/etc/gha-listener", "readOnly": True}],
            }
        ],
        "volumes": [{"name": "listener-config", "secret": {"secretName": "arc-runners-754b578d-listener-config"}}],
    }


def listener_pod_spec_live() -> JSON:
    return {
        "serviceAccountName": "arc-runners-754b578d-listener",
        "serviceAccount": "arc-runners-754b578d-listener",
        "restartPolicy": "Never",
        "imagePullSecrets": [{"name": "ghcr-pull"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "nodeName": "kwok-node-0",
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "tolerations": [
            {"key": "arc", "operator": "Equal", "value": "listener", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "containers": [
            {
                "name": "listener",
                "image": "ghcr.io/actions/gha-runner-scale-set-controller:0.14.2",
                "command": ["/ghalistener"],
                "env": [
                    {"name": "LISTENER_CONFIG_PATH", "value": "/etc/gha-listener/config.json"},
                    {
                        "name": "POD_NAME",
                        "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
                    },
                ],
                "ports": [{"containerPort": 8080, "name": "metrics", "protocol": "TCP"}],
                "resources": {
                    "limits": {"cpu": "500m", "memory": "256Mi"},
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                },
                "volumeMounts": [
                    {"name": "listener-config", "mountPath": "/etc/gha-listener", "readOnly": True},
                    {
                        "name": "kube-api-access-7xk2p",
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "readOnly": True,
                    },
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "volumes": [
            {
                "name": "listener-config",
                "secret": {"secretName": "arc-runners-754b578d-listener-config", "defaultMode": 420},
            },
            {
                "name": "kube-api-access-7xk2p",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    }
                                ]
                            }
                        },
                    ],
                },
            },
        ],
    }


def _runner_container(name: str, image: str, cpu: str, memory: str) -> JSON:
    return {
        "name": name,
        "image": image,
        "command": ["/home/runner/run.sh"] if name == "runner" else None,
        "args": [] if name == "runner" else ["--tls=false"],
        "env": [
            {"name": "ACTIONS_RUNNER_CONTAINER_HOOKS", "value": "/home/runner/k8s/index.js"},
            {"name": "ACTIONS_RUNNER_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {
                "name": "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER",
                "valueFrom": {"configMapKeyRef": {"name": "runner-settings", "key": "require-job-container"}},
            },
            {
                "name": "GITHUB_TOKEN_FILE",
                "valueFrom": {"secretKeyRef": {"name": "runner-extra", "key": "token-path", "optional": True}},
            },
            {
                "name": "CPU_LIMIT",
                "valueFrom": {"resourceFieldRef": {"containerName": name, "resource": "limits.cpu", "divisor": "1m"}},
            },
            {"name": "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS", "value": "120"},
        ],
        "resources": {
            "limits": {"cpu": cpu, "memory": memory, "ephemeral-storage": "10Gi"},
            "requests": {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "2Gi"},
        },
        "securityContext": {"runAsUser": 1001, "runAsNonRoot": True, "allowPrivilegeEscalation": False}
        if name == "runner"
        else {"privileged": True},
        "volumeMounts": [
            {"name": "work", "mountPath": "/home/runner/_work"},
            {"name": "dind-sock", "mountPath": "/var/run"},
            {"name": "runner-config", "mountPath": "/etc/runner", "readOnly": True},
        ],
    }


def runner_pod_template() -> JSON:
    """A three-container runner pod template (runner, dind, log shipper), as in an EphemeralRunnerSpec."""
    return {
        "metadata": {
            "labels": {"app.kubernetes.io/component": "runner", "team": "platform"},
            "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        },
        "spec": {
            "serviceAccountName": "arc-runner",
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 3600,
            "automountServiceAccountToken": False,
            "securityContext": {"fsGroup": 1001},
            "nodeSelector": {"kubernetes.io/arch": "amd64", "node-pool": "ci"},
            "tolerations": [
                {"key": "ci", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
                {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 120},
            ],
            "initContainers": [
                {
                    "name": "init-work",
                    "image": "ghcr.io/actions/actions-runner:2.328.0",
                    "command": ["cp", "-r", "/home/runner/externals/.", "/home/runner/tmpDir/"],
                    "volumeMounts": [{"name": "work", "mountPath": "/home/runner/tmpDir"}],
                }
            ],
            "containers": [
                _runner_container("runner", "ghcr.io/actions/actions-runner:2.328.0", "2", "4Gi"),
                _runner_container("dind", "docker:28.3-dind", "1500m", "2Gi"),
                _runner_container("fluent-bit", "fluent/fluent-bit:4.0", "200m", "128Mi"),
            ],
            "volumes": [
                {"name": "work", "emptyDir": {"sizeLimit": "20Gi"}},
                {"name": "dind-sock", "emptyDir": {"medium": "Memory"}},
                {"name": "runner-config", "configMap": {"name": "runner-config", "defaultMode": 420}},
            ],
        },
    }
