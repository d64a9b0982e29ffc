"""kwok Stage definitions: how fake nodes and pods move through their lifecycle without a kubelet.

- ``node-ready``: a node kwok manages becomes Ready; it keeps the allocatable and capacity it was created
  with (a node pool's finite nodes, ``node_pool.py``), and a node created without gets a generous one.
- ``pod-running``: a scheduled pod becomes Running and Ready, every container ``running``.
- ``pod-finish``: a Running pod annotated ``FINISH_ANNOTATION`` (``succeeded`` or ``failed``) terminates,
  its containers exiting with the code in ``EXIT_CODE_ANNOTATION`` (default 0 / 1): how tests end a
  runner's job the way a real runner process would.
- ``pod-delete``: a pod with a deletionTimestamp is removed (the kubelet's part of graceful deletion), unless
  it is annotated ``KUBELET_ANNOTATION``: a lab kubelet runs that pod's process (the listener kubelet,
  ``node/listener_kubelet.py``) and removes the pod itself once the process has stopped within the pod's grace
  period, as a kubelet does. Without the exception kwok removed such a pod at once, and a kubelet that saw the
  deletion late read a grace period of 0 and killed the process before it could clean up.

A pod whose status someone else set to Succeeded/Failed matches no stage, so kwok never fights it.
"""

from __future__ import annotations

FINISH_ANNOTATION = "kwok.arc-scaleset.dev/finish"
EXIT_CODE_ANNOTATION = "kwok.arc-scaleset.dev/exit-code"
KUBELET_ANNOTATION = "kwok.arc-scaleset.dev/kubelet"

_NODE_READY = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Ready, status: "True", reason: KubeletReady, message: "kwok node is ready",
         lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      - {type: MemoryPressure, status: "False", reason: KubeletHasSufficientMemory, message: "",
         lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      - {type: DiskPressure, status: "False", reason: KubeletHasNoDiskPressure, message: "",
         lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      - {type: PIDPressure, status: "False", reason: KubeletHasSufficientPID, message: "",
         lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      addresses:
      - {type: InternalIP, address: {{ NodeIP | Quote }}}
      - {type: Hostname, address: {{ NodeName | Quote }}}
      allocatable:
      {{ with .status.allocatable }}
      {{ YAML . 1 }}
      {{ else }}
        {cpu: 1k, memory: 1Ti, pods: 1M}
      {{ end }}
      capacity:
      {{ with .status.capacity }}
      {{ YAML . 1 }}
      {{ else }}
        {cpu: 1k, memory: 1Ti, pods: 1M}
      {{ end }}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: fake
        kubeProxyVersion: fake
        containerRuntimeVersion: fake
        kernelVersion: fake
        osImage: kwok
        machineID: ""
        bootID: ""
        systemUUID: ""
      phase: Running
"""

_POD_RUNNING = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-running
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
    - {key: .status.phase, operator: In, values: [Pending]}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: PodScheduled, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        started: true
        restartCount: 0
        state: {running: {startedAt: {{ $now | Quote }}}}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        restartCount: 0
        state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }},
                finishedAt: {{ $now | Quote }}}}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" )
        ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
"""

_POD_FINISH = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-finish-{outcome}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchAnnotations: {{"{finish}": "{outcome}"}}
    matchExpressions:
    - {{key: .metadata.deletionTimestamp, operator: DoesNotExist}}
    - {{key: .status.phase, operator: In, values: [Running]}}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $code := or (index .metadata.annotations "{exit_code}") "{default_code}" }}}}
      conditions:
      - {{type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: {{{{ $now | Quote }}}}}}
      - {{type: ContainersReady, status: "False", reason: PodCompleted, lastTransitionTime: {{{{ $now | Quote }}}}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - name: {{{{ .name | Quote }}}}
        image: {{{{ .image | Quote }}}}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: {{{{ $code }}}}
            reason: {reason}
            startedAt: {{{{ $now | Quote }}}}
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: {phase}
"""

_POD_DELETE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - {{key: .metadata.deletionTimestamp, operator: Exists}}
    - {{key: '.metadata.annotations["{kubelet}"]', operator: DoesNotExist}}
  next:
    delete: true
"""


def stages_yaml() -> str:
    """All stages as one multi-document YAML for ``kwok --config``."""
    finish = [
        _POD_FINISH.format(
            outcome=outcome,
            finish=FINISH_ANNOTATION,
            exit_code=EXIT_CODE_ANNOTATION,
            default_code=code,
            reason=reason,
            phase=phase,
        )
        for outcome, code, reason, phase in (
            ("succeeded", 0, "Completed", "Succeeded"),
            ("failed", 1, "Error", "Failed"),
        )
    ]
    return "---\n".join([_NODE_READY, _POD_RUNNING, *finish, _POD_DELETE.format(kubelet=KUBELET_ANNOTATION)])
