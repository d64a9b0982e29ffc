"""A realistic AutoscalingRunnerSet manifest, as a user of ARC's Helm chart ends up with.

Used by the tests (round trips through the models and the API server must neither lose nor invent a field)
and as a reference for what the CRD schema has to accept. Every value here is one a real scale set uses:
three containers (runner, Docker-in-Docker sidecar, log shipper), quantities in both notations, env from
secrets and the downward API, an explicitly empty ``env: []``, several volume kinds and tolerations.
"""

from __future__ import annotations

from typing import Any

from arc_scaleset.api.common import API_VERSION


def example_autoscaling_runner_set(*, name: str = "arc-runners", namespace: str = "arc-runners") -> dict[str, Any]:
    """A fresh copy of the example manifest (safe to modify)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "AutoscalingRunnerSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/version": "0.14.2", "team": "platform"},
            "annotations": {"example.com/owner": "platform-team"},
        },
        "spec": {
            "githubConfigUrl": "https://github.com/my-org",
            "githubConfigSecret": "github-app-credentials",
            "runnerGroup": "linux-large",
            "runnerScaleSetName": "linux-large",
            "runnerScaleSetLabels": ["self-hosted", "linux", "x64"],
            "minRunners": 1,
            "maxRunners": 20,
            "proxy": {
                "http": {"url": "http://proxy.internal:3128", "credentialSecretRef": "proxy-credentials"},
                "https": {"url": "http://proxy.internal:3128"},
                "noProxy": ["10.0.0.0/8", ".svc.cluster.local"],
            },
            "githubServerTLS": {"certificateFrom": {"configMapKeyRef": {"name": "ca-bundle", "key": "ca.crt"}}},
            "listenerMetrics": {
                "counters": {"gha_started_jobs_total": {"labels": ["repository", "organization"]}},
                "gauges": {"gha_assigned_jobs": {"labels": ["name", "namespace"]}},
                "histograms": {
                    "gha_job_startup_duration_seconds": {"labels": ["repository"], "buckets": [0.5, 2.5, 10.0, 60.0]}
                },
            },
            "autoscalingListener": {"labels": {"team": "platform"}},
            "ephemeralRunnerMetadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}},
            "listenerTemplate": {
                "spec": {
                    "containers": [{"name": "listener", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "arc", "effect": "NoSchedule"}],
                }
            },
            "template": {
                "metadata": {
                    "labels": {"workload": "ci"},
                    "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                },
                "spec": {
                    "serviceAccountName": "arc-runner",
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 3600,
                    "nodeSelector": {"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m6i.2xlarge"},
                    "tolerations": [
                        {"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"},
                        {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                    ],
                    "initContainers": [
                        {
                            "name": "init-work",
                            "image": "ghcr.io/actions/actions-runner:2.330.0",
                            "command": ["cp", "-r", "/home/runner/externals/.", "/home/runner/tmpDir/"],
                            "volumeMounts": [{"name": "work", "mountPath": "/home/runner/tmpDir"}],
                        }
                    ],
                    "containers": [
                        {
                            "name": "runner",
                            "image": "ghcr.io/actions/actions-runner:2.330.0",
                            "command": ["/home/runner/run.sh"],
                            "env": [
                                {"name": "DOCKER_HOST", "value": "tcp://localhost:2376"},
                                {"name": "DOCKER_TLS_VERIFY", "value": "1"},
                                {
                                    "name": "NPM_TOKEN",
                                    "valueFrom": {"secretKeyRef": {"name": "registry-tokens", "key": "npm"}},
                                },
                                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                {
                                    "name": "CPU_LIMIT",
                                    "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}},
                                },
                            ],
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "10Gi"},
                                "limits": {"cpu": 2, "memory": "4Gi"},
                            },
                            "securityContext": {"runAsUser": 1001, "runAsNonRoot": True},
                            "volumeMounts": [
                                {"name": "work", "mountPath": "/home/runner/_work"},
                                {"name": "dind-cert", "mountPath": "/certs/client", "readOnly": True},
                            ],
                        },
                        {
                            "name": "dind",
                            "image": "docker:28-dind",
                            "args": ["dockerd", "--host=tcp://0.0.0.0:2376"],
                            "env": [],
                            "ports": [{"name": "docker", "containerPort": 2376, "protocol": "TCP"}],
                            "securityContext": {"privileged": True},
                            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
                            "readinessProbe": {
                                "tcpSocket": {"port": "docker"},
                                "periodSeconds": 5,
                                "failureThreshold": 12,
                            },
                            "volumeMounts": [
                                {"name": "work", "mountPath": "/home/runner/_work"},
                                {"name": "dind-cert", "mountPath": "/certs/client"},
                                {"name": "dind-externals", "mountPath": "/home/runner/externals"},
                            ],
                        },
                        {
                            "name": "log-shipper",
                            "image": "fluent/fluent-bit:4.0",
                            "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                            "volumeMounts": [
                                {"name": "work", "mountPath": "/logs", "readOnly": True},
                                {"name": "fluent-bit-config", "mountPath": "/fluent-bit/etc/"},
                            ],
                        },
                    ],
                    "volumes": [
                        {"name": "work", "emptyDir": {"sizeLimit": "20Gi"}},
                        {"name": "dind-cert", "emptyDir": {}},
                        {"name": "dind-externals", "emptyDir": {"medium": "Memory"}},
                        {"name": "fluent-bit-config", "configMap": {"name": "fluent-bit", "defaultMode": 420}},
                        {"name": "registry-tokens", "secret": {"secretName": "registry-tokens", "optional": True}},
                    ],
                },
            },
        },
    }
