"""The kubelet of listener pods: runs ``arc-scaleset listener`` as a real local process for each one.

The local cluster's kwok nodes run no containers, so the listener pods the AutoscalingListener controller
creates would never listen. :class:`ListenerKubelet` watches the pods labelled
``app.kubernetes.io/component=runner-scale-set-listener`` in one namespace and plays the kubelet's part:

- **Start.** When such a pod is bound to a node and Running (kwok marks it so), its ``listener`` container
  is prepared by :mod:`.pod_sandbox` (env with Secret references resolved, the ``listener-config`` Secret
  volume materialised so ``LISTENER_CONFIG_PATH`` names a real file, ``HOSTNAME`` = the pod's name, a
  ServiceAccount token from TokenRequest in a kubeconfig) and ``python -m arc_scaleset.cli listener`` is
  started with that environment -- whatever image and command the container names, since there is no
  container runtime. Pods of one node share one network namespace here, so a listener config whose
  ``metrics_addr`` is set gets a free loopback port instead (:attr:`ListenerProcess.metrics_port`), and so
  does a ``LISTENER_PROBE_ADDR`` in the pod's env (:attr:`ListenerProcess.probe_port`).
- **Probes.** Liveness and readiness probes are not run (a real kubelet would restart a listener whose
  ``/healthz`` keeps failing); the listener serves them on the ports above, where a test can ask.
  Output goes to ``<log_dir>/<pod name>.log`` (appended; one header line per start).
- **Stop.** When the pod is deleted or gets a deletionTimestamp (or is replaced by a pod of the same name
  and another UID): SIGTERM, then SIGKILL after the pod's grace period (``deletionGracePeriodSeconds``,
  else ``terminationGracePeriodSeconds``, else 30 s).
- **Removal.** Before it starts a process the kubelet annotates the pod ``KUBELET_ANNOTATION``, so kwok's
  ``pod-delete`` stage leaves the pod's removal to it: a deleted pod stays (Terminating) until its process has
  stopped, then the kubelet removes it (grace 0), as a kubelet does. When :meth:`ListenerKubelet.run` returns it
  takes the annotation off the pods still there, handing their removal back to kwok.
- **Exit.** When the process ends by itself, the pod's status is written as the kubelet would write it
  for ``restartPolicy: Never``: phase ``Succeeded`` (exit 0) or ``Failed``, the ``listener`` container
  ``terminated`` with its exit code (128+N after signal N). The process is never restarted in the same
  pod: the AutoscalingListener controller replaces the pod.
- **Lifetime.** Processes get ``PR_SET_PDEATHSIG``: they die with the kubelet even if it is SIGKILLed;
  :meth:`ListenerKubelet.run` stops them all (gracefully, bounded by ``shutdown_timeout``) when it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from arc_scaleset.api.keys import COMPONENT_LISTENER, LABEL_COMPONENT, LISTENER_CONTAINER_NAME
from arc_scaleset.api.listener_config import CONFIG_PATH_ENV, PROBE_ADDR_ENV
from arc_scaleset.kube.client import KubeClient, PatchType, Preconditions
from arc_scaleset.kube.errors import Conflict, KubeError, NotFound
from arc_scaleset.kube.informer import Informer, Object
from arc_scaleset.kube.kubeconfig import load_kubeconfig
from arc_scaleset.kube.resources import PODS
from arc_scaleset.tasks import cancel_and_wait
from arc_scaleset_lab.cluster.localcluster import LOOPBACK, free_port
from arc_scaleset_lab.cluster.processes import die_with_parent
from arc_scaleset_lab.cluster.stages import KUBELET_ANNOTATION
from arc_scaleset_lab.node.arc_listener import (
    ARC_METRICS_ADDR_KEY,
    arc_listener_argv,
    arc_listener_container,
    prepare_in_cluster,
)
from arc_scaleset_lab.node.pod_sandbox import (
    DEFAULT_TOKEN_SECONDS,
    Sandbox,
    SandboxError,
    prepare_sandbox,
    refresh_delay,
    refresh_token,
)

log = logging.getLogger(__name__)

LISTENER_POD_SELECTOR: Final = f"{LABEL_COMPONENT}={COMPONENT_LISTENER}"
DEFAULT_GRACE_SECONDS: Final = 30.0
RETRY_BASE_SECONDS: Final = 1.0
RETRY_CAP_SECONDS: Final = 30.0
# What a listener process inherits from the kubelet's own environment; everything else comes from the pod.
INHERITED_ENV: Final = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "SSL_CERT_FILE")


@dataclass
class ListenerProcess:
    """One listener pod's process as the kubelet runs it (a snapshot for callers: tests, the demo)."""

    namespace: str
    pod: str
    uid: str
    pid: int | None
    log_path: Path
    credentials: str
    """``service account <ns>/<name>`` (TokenRequest) or ``admin kubeconfig`` (the fallback)."""
    metrics_port: int | None
    returncode: int | None
    probe_port: int | None = None


@dataclass(eq=False)
class _PodWorker:
    """The kubelet's state for one pod UID."""

    namespace: str
    name: str
    uid: str
    grace: float
    log_path: Path
    task: asyncio.Task[None] | None = None
    process: asyncio.subprocess.Process | None = None
    sandbox: Sandbox | None = None
    metrics_port: int | None = None
    probe_port: int | None = None
    arc_container: str | None = None
    """ARC's own listener pod: the container that runs ARC's listener, run with
    :attr:`ListenerKubelet.arc_listener_binary` (see :mod:`.arc_listener`)."""
    claimed: bool = False
    """The pod carries ``KUBELET_ANNOTATION``: its removal is this kubelet's to do."""
    remove_pod: bool = False
    """The pod is being deleted: remove it once the process has stopped."""
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def snapshot(self) -> ListenerProcess:
        return ListenerProcess(
            namespace=self.namespace,
            pod=self.name,
            uid=self.uid,
            pid=self.process.pid if self.process else None,
            log_path=self.log_path,
            credentials=self.sandbox.credentials if self.sandbox else "",
            metrics_port=self.metrics_port,
            returncode=self.process.returncode if self.process else None,
            probe_port=self.probe_port,
        )


class ListenerKubelet:
    """Runs a listener process per listener pod in ``namespace``; see the module docstring.

    ``kubeconfig`` is an admin kubeconfig (the kubelet reads pods, Secrets, writes pod status and mints
    tokens; it is also the fallback credential of the listeners). ``python`` is the interpreter that runs
    ``-m arc_scaleset.cli listener``. ``extra_env`` is added to every listener's environment (the pod's own
    env wins). ``work_dir`` holds the per-pod sandboxes (Secret data, tokens; default: a private directory
    under the system temp dir, removed when :meth:`run` returns). Run with :meth:`run`, stop with
    :meth:`request_stop`.
    """

    def __init__(
        self,
        *,
        kubeconfig: Path,
        namespace: str,
        log_dir: Path,
        work_dir: Path | None = None,
        python: str = sys.executable,
        extra_env: Mapping[str, str] | None = None,
        token_seconds: int = DEFAULT_TOKEN_SECONDS,
        shutdown_timeout: float = 30.0,
        arc_listener_binary: Path | None = None,
    ) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.namespace = namespace
        self.log_dir = Path(log_dir)
        # Sandboxes hold Secret data: never under the log directory, which people share and search.
        self._own_work_dir = work_dir is None
        self.work_dir = (
            Path(work_dir)
            if work_dir
            else Path(tempfile.gettempdir()) / f"arc-scaleset-listener-kubelet-{os.getpid()}-{id(self):x}"
        )
        self.python = python
        self.extra_env = dict(extra_env or {})
        self.token_seconds = token_seconds
        self.shutdown_timeout = shutdown_timeout
        # ARC's listener binary: when set, pods whose container runs ARC's listener command run it instead.
        self.arc_listener_binary = arc_listener_binary
        self._connection = load_kubeconfig(self.kubeconfig)
        self.kube = KubeClient(self._connection)
        self._informer = Informer(self.kube, PODS, namespace=namespace, label_selector=LISTENER_POD_SELECTOR)
        self._workers: dict[tuple[str, str], _PodWorker] = {}
        self._stopping_workers: set[_PodWorker] = set()
        # Per pod: the UID whose process ended by itself (restartPolicy Never: not started again) and
        # (UID, consecutive preparation failures); both forgotten when the pod is gone.
        self._exited: dict[tuple[str, str], str] = {}
        self._failures: dict[tuple[str, str], tuple[str, int]] = {}
        self._dirty: dict[tuple[str, str], None] = {}
        self._wake = asyncio.Event()
        self._stop_requested = False
        self._retry_handles: set[asyncio.TimerHandle] = set()
        self._removals: set[asyncio.Task[None]] = set()

    # -- public -----------------------------------------------------------------------------------------

    @property
    def processes(self) -> dict[str, ListenerProcess]:
        """The listener processes started and not yet ended (and reaped), by pod name; a process being
        stopped is listed until it has exited, unless a new pod of the same name already has one."""
        workers = [*self._stopping_workers, *self._workers.values()]
        return {w.name: w.snapshot() for w in workers if w.process is not None and not w.stopped.is_set()}

    def log_path(self, pod: str) -> Path:
        return self.log_dir / f"{pod}.log"

    @property
    def synced(self) -> bool:
        return self._informer.has_synced

    def request_stop(self) -> None:
        """Make :meth:`run` stop every listener and return (safe from signal handlers)."""
        self._stop_requested = True
        self._wake.set()

    async def run(self, *, handle_signals: bool = False) -> None:
        """Watch listener pods and run their processes until :meth:`request_stop` (or SIGTERM/SIGINT when
        ``handle_signals``); then stop every process and return."""
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.request_stop)
                installed.append(sig)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        registration = self._informer.add_handler(
            on_add=self._on_event, on_update=lambda _old, new: self._on_event(new), on_delete=self._on_event
        )
        self._informer.start()
        log.info("listener kubelet watching pods [%s] in %s", LISTENER_POD_SELECTOR, self.namespace)
        try:
            while not self._stop_requested:
                await self._wake.wait()
                self._wake.clear()
                dirty, self._dirty = list(self._dirty), {}
                for key in dirty:
                    if self._stop_requested:
                        break
                    self._sync(key)
        finally:
            registration.remove()
            await self._informer.stop()
            for handle in self._retry_handles:
                handle.cancel()
            await self._stop_all()
            await self._hand_back_removals()
            await self.kube.close()
            if self._own_work_dir:
                shutil.rmtree(self.work_dir, ignore_errors=True)
            for sig in installed:
                loop.remove_signal_handler(sig)
            log.info("listener kubelet stopped")

    # -- events -----------------------------------------------------------------------------------------

    def _on_event(self, pod: Object) -> None:
        meta = pod.get("metadata") or {}
        self._mark_dirty((str(meta.get("namespace") or ""), str(meta.get("name") or "")))

    def _mark_dirty(self, key: tuple[str, str]) -> None:
        self._dirty[key] = None
        self._wake.set()

    def _sync(self, key: tuple[str, str]) -> None:
        """Bring the processes of pod ``key`` in line with the pod as cached (level-triggered, never blocks)."""
        pod = self._informer.store.get(key[0], key[1])
        meta = (pod or {}).get("metadata") or {}
        uid = str(meta.get("uid") or "")
        gone = pod is None or bool(meta.get("deletionTimestamp"))
        worker = self._workers.get(key)
        if worker is not None and (gone or worker.uid != uid):
            worker.remove_pod = pod is not None and worker.uid == uid
            self._stop(worker, grace=grace_seconds(pod) if pod is not None else worker.grace)
            worker = None
        if pod is None:
            self._exited.pop(key, None)
            self._failures.pop(key, None)
            return
        if gone:
            if is_claimed(pod) and not self._runs(uid):
                self._remove_pod_soon(key, uid)  # its process ended (or never ran under this kubelet)
            return
        if worker is not None or self._exited.get(key) == uid or not ready_to_start(pod):
            return
        previous = next((w for w in self._stopping_workers if w.key == key), None)
        worker = _PodWorker(
            namespace=key[0],
            name=key[1],
            uid=uid,
            grace=grace_seconds(pod),
            log_path=self.log_path(key[1]),
            arc_container=arc_listener_container(pod) if self.arc_listener_binary is not None else None,
        )
        self._workers[key] = worker
        worker.task = asyncio.get_running_loop().create_task(
            self._lifecycle(worker, pod, previous), name=f"listener-pod-{key[1]}"
        )

    # -- one pod ----------------------------------------------------------------------------------------

    async def _lifecycle(self, worker: _PodWorker, pod: Object, previous: _PodWorker | None) -> None:
        """Prepare, start, wait for the exit or a stop request; report an exit the kubelet did not cause.

        This task alone owns the process: :meth:`_stop` only asks (``worker.stop_requested``), so a stop
        that arrives while preparing or spawning can never orphan a process.
        """
        refresher: asyncio.Task[None] | None = None
        try:
            if previous is not None:
                await previous.stopped.wait()  # the pod it replaces has fully stopped (same name, same owner)
            if worker.stop_requested.is_set():
                return
            try:
                worker.sandbox = await prepare_sandbox(
                    self.kube,
                    self._connection,
                    pod,
                    container=worker.arc_container or LISTENER_CONTAINER_NAME,
                    parent=self.work_dir,
                    admin_kubeconfig=self.kubeconfig,
                    token_seconds=self.token_seconds,
                )
                if worker.stop_requested.is_set():
                    return
                worker.claimed = await self._claim(worker, pod)
                if worker.stop_requested.is_set() or not worker.claimed:
                    return
                worker.process = await self._spawn(worker, self._process_env(worker))
            except (SandboxError, KubeError, OSError) as exc:
                self._retry_later(worker, str(exc))
                return
            self._failures.pop(worker.key, None)
            log.info(
                "pod %s/%s: listener started (pid %s, %s)",
                worker.namespace,
                worker.name,
                worker.process.pid,
                worker.sandbox.credentials,
            )
            if worker.sandbox.token_expiry is not None:
                refresher = asyncio.get_running_loop().create_task(self._refresh_tokens(worker, pod))
            code = await self._wait_for_exit_or_stop(worker, worker.process)
            if code is not None:
                log.info("pod %s/%s: listener exited with code %s", worker.namespace, worker.name, code)
                self._exited[worker.key] = worker.uid
                if self._workers.get(worker.key) is worker:
                    del self._workers[worker.key]
                await self._report_exit(worker, pod, code)
        finally:
            await cancel_and_wait(refresher)
            if worker.sandbox is not None:
                worker.sandbox.cleanup()
            if worker.remove_pod and worker.claimed:
                await self._remove_pod(worker.namespace, worker.name, worker.uid)
            worker.stopped.set()

    async def _wait_for_exit_or_stop(self, worker: _PodWorker, process: asyncio.subprocess.Process) -> int | None:
        """The exit code when the process ends by itself; ``None`` when it was stopped on request
        (SIGTERM, then SIGKILL after ``worker.grace`` seconds)."""
        exited = asyncio.ensure_future(process.wait())
        stop = asyncio.ensure_future(worker.stop_requested.wait())
        try:
            await asyncio.wait((exited, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if exited.done() and not worker.stop_requested.is_set():
            return exited.result()
        if not exited.done():
            log.info("pod %s/%s: stopping the listener (grace %.0fs)", worker.namespace, worker.name, worker.grace)
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(exited), timeout=worker.grace)
            except TimeoutError:
                log.warning(
                    "pod %s/%s: listener ignored SIGTERM for %.0fs; killing it",
                    worker.namespace,
                    worker.name,
                    worker.grace,
                )
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await exited
        return None

    def _process_env(self, worker: _PodWorker) -> dict[str, str]:
        assert worker.sandbox is not None
        env = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}
        env.update(self.extra_env)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(worker.sandbox.env)
        if worker.arc_container:
            env.update(prepare_in_cluster(worker.sandbox, self._connection, worker.namespace))
            worker.metrics_port = give_metrics_a_free_port(
                env.get(CONFIG_PATH_ENV), worker.sandbox.root, key=ARC_METRICS_ADDR_KEY
            )
            return env
        worker.metrics_port = give_metrics_a_free_port(env.get(CONFIG_PATH_ENV), worker.sandbox.root)
        worker.probe_port = give_probes_a_free_port(env)
        return env

    async def _spawn(self, worker: _PodWorker, env: dict[str, str]) -> asyncio.subprocess.Process:
        assert worker.sandbox is not None
        header = f"=== pod {worker.namespace}/{worker.name} uid {worker.uid} started {_now_rfc3339()} ===\n"
        with worker.log_path.open("ab") as log_file:
            log_file.write(header.encode())
            log_file.flush()
            argv = [self.python, "-m", "arc_scaleset.cli", "listener"]
            if worker.arc_container and self.arc_listener_binary is not None:
                argv = arc_listener_argv(self.arc_listener_binary, worker.sandbox)
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=worker.sandbox.root,
                # Its own session: a Ctrl-C in the terminal reaches the kubelet, which stops listeners in order.
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def _retry_later(self, worker: _PodWorker, reason: str) -> None:
        uid, previous = self._failures.get(worker.key, (worker.uid, 0))
        failures = previous + 1 if uid == worker.uid else 1
        self._failures[worker.key] = (worker.uid, failures)
        delay = min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** (failures - 1))
        log.warning(
            "pod %s/%s: cannot start the listener (%s); retrying in %.0fs", worker.namespace, worker.name, reason, delay
        )
        if self._workers.get(worker.key) is worker:
            del self._workers[worker.key]

        def retry() -> None:
            self._retry_handles.discard(handle)
            self._mark_dirty(worker.key)

        handle = asyncio.get_running_loop().call_later(delay, retry)
        self._retry_handles.add(handle)

    async def _refresh_tokens(self, worker: _PodWorker, pod: Object) -> None:
        assert worker.sandbox is not None
        while worker.sandbox.token_expiry is not None:
            now = dt.datetime.now(dt.UTC)
            await asyncio.sleep(refresh_delay(worker.sandbox.token_expiry, now=now, lifetime=self.token_seconds))
            try:
                worker.sandbox.token_expiry = await refresh_token(
                    self.kube, pod, worker.sandbox, seconds=self.token_seconds
                )
            except KubeError as exc:
                log.warning("pod %s/%s: token refresh failed (%s); retrying", worker.namespace, worker.name, exc)
                await asyncio.sleep(RETRY_CAP_SECONDS)

    async def _report_exit(self, worker: _PodWorker, pod: Object, code: int) -> None:
        try:
            await self.kube.patch(
                PODS,
                worker.name,
                terminated_status_patch(
                    pod, code, finished_at=_now_rfc3339(), listener=worker.arc_container or LISTENER_CONTAINER_NAME
                ),
                namespace=worker.namespace,
                patch_type=PatchType.STRATEGIC,
                subresource="status",
            )
        except NotFound:
            return
        except KubeError as exc:
            log.warning("pod %s/%s: cannot write the terminated status: %s", worker.namespace, worker.name, exc)

    # -- the pod's removal -------------------------------------------------------------------------------

    async def _claim(self, worker: _PodWorker, pod: Object) -> bool:
        """Annotate the pod ``KUBELET_ANNOTATION`` (kwok then leaves its removal to this kubelet); ``False``
        when the pod is gone or has another UID."""
        if is_claimed(pod):
            return True
        patch = {"metadata": {"uid": worker.uid, "annotations": {KUBELET_ANNOTATION: "listener"}}}
        try:
            await self.kube.patch(PODS, worker.name, patch, namespace=worker.namespace)
        except (NotFound, Conflict):
            return False
        return True

    def _runs(self, uid: str) -> bool:
        """A process of pod ``uid`` is starting, running or stopping."""
        workers = [*self._workers.values(), *self._stopping_workers]
        return any(w.uid == uid and not w.stopped.is_set() for w in workers)

    def _remove_pod_soon(self, key: tuple[str, str], uid: str) -> None:
        task = asyncio.get_running_loop().create_task(self._remove_pod(key[0], key[1], uid))
        self._removals.add(task)
        task.add_done_callback(self._removals.discard)

    async def _remove_pod(self, namespace: str, name: str, uid: str) -> None:
        """Remove a deleted pod whose process has stopped: the kubelet's last step of graceful deletion."""
        try:
            await self.kube.delete(
                PODS,
                name,
                namespace=namespace,
                grace_period_seconds=0,
                preconditions=Preconditions(uid=uid),
                missing_ok=True,
            )
        except Conflict:
            return  # already replaced by a pod of the same name
        except KubeError as exc:
            log.warning("pod %s/%s: cannot remove the stopped pod: %s", namespace, name, exc)

    async def _hand_back_removals(self) -> None:
        """On the way out: finish the removals under way and take the annotation off the pods still here, so
        kwok removes them when they are deleted after this kubelet has gone."""
        if self._removals:
            await asyncio.wait(set(self._removals), timeout=self.shutdown_timeout)
        claimed = [pod for pod in self._informer.store.list() if is_claimed(pod)]
        await asyncio.gather(*(self._unclaim(pod) for pod in claimed))

    async def _unclaim(self, pod: Object) -> None:
        meta = pod.get("metadata") or {}
        patch = {"metadata": {"annotations": {KUBELET_ANNOTATION: None}}}
        try:
            await self.kube.patch(PODS, str(meta.get("name")), patch, namespace=str(meta.get("namespace")))
        except NotFound:
            return
        except KubeError as exc:
            log.warning("pod %s: cannot hand its removal back to kwok: %s", meta.get("name"), exc)

    # -- stopping ---------------------------------------------------------------------------------------

    def _stop(self, worker: _PodWorker, *, grace: float) -> None:
        """Ask ``worker``'s task to stop its process (SIGTERM, SIGKILL after ``grace`` seconds)."""
        if self._workers.get(worker.key) is worker:
            del self._workers[worker.key]
        worker.grace = grace
        if worker.stopped.is_set():
            return
        worker.stop_requested.set()
        self._stopping_workers.add(worker)
        if worker.task is not None:
            worker.task.add_done_callback(lambda _: self._stopping_workers.discard(worker))

    async def _stop_all(self) -> None:
        workers = list(self._workers.values())
        for worker in workers:
            self._stop(worker, grace=min(worker.grace, self.shutdown_timeout))
        pending = [w.stopped.wait() for w in [*workers, *self._stopping_workers]]
        if pending:
            try:
                async with asyncio.timeout(self.shutdown_timeout + 5.0):
                    await asyncio.gather(*pending)
            except TimeoutError:
                log.warning("some listener processes did not stop in time")


# -- pure helpers -------------------------------------------------------------------------------------


def ready_to_start(pod: Mapping[str, Any]) -> bool:
    """Bound to a node and marked Running (by kwok): the moment a kubelet would start its containers."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") == "Running"


def is_claimed(pod: Mapping[str, Any]) -> bool:
    """The pod carries ``KUBELET_ANNOTATION``: a lab kubelet, not kwok, removes it once it is deleted."""
    return KUBELET_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def grace_seconds(pod: Mapping[str, Any]) -> float:
    meta = pod.get("metadata") or {}
    for value in (meta.get("deletionGracePeriodSeconds"), (pod.get("spec") or {}).get("terminationGracePeriodSeconds")):
        if isinstance(value, int | float) and value >= 0:
            return float(value)
    return DEFAULT_GRACE_SECONDS


def exit_code_of(returncode: int) -> int:
    """A process return code as a container exit code: signal N (a negative code) becomes 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def terminated_status_patch(
    pod: Mapping[str, Any], returncode: int, *, finished_at: str, listener: str = LISTENER_CONTAINER_NAME
) -> dict[str, Any]:
    """The strategic-merge status patch of a ``restartPolicy: Never`` pod whose listener ended with ``returncode``.

    Every container is reported terminated (nothing else runs here): the listener (container ``listener``;
    ARC's pods name it ``autoscaler``) with its exit code, the others with 0. The pod's UID rides along so
    that the write fails on a recreated pod of that name.
    """
    code = exit_code_of(returncode)
    status = pod.get("status") or {}
    started = {
        entry.get("name"): ((entry.get("state") or {}).get("running") or {}).get("startedAt")
        for entry in status.get("containerStatuses") or ()
    }
    container_statuses = []
    for container in (pod.get("spec") or {}).get("containers") or ():
        name = container.get("name")
        exit_code = code if name == listener else 0
        container_statuses.append(
            {
                "name": name,
                "image": container.get("image", ""),
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if exit_code == 0 else "Error",
                        "startedAt": started.get(name) or finished_at,
                        "finishedAt": finished_at,
                    }
                },
            }
        )
    not_ready = {"status": "False", "reason": "PodCompleted", "lastTransitionTime": finished_at}
    return {
        "metadata": {"uid": (pod.get("metadata") or {}).get("uid")},
        "status": {
            "phase": "Succeeded" if code == 0 else "Failed",
            "conditions": [{"type": "Ready", **not_ready}, {"type": "ContainersReady", **not_ready}],
            "containerStatuses": container_statuses,
        },
    }


def give_metrics_a_free_port(config_path: str | None, sandbox_root: Path, *, key: str = "metrics_addr") -> int | None:
    """Point a materialised listener config's metrics address (``key``: ``metrics_addr``, or ARC 0.27's
    ``metricsAddr``) at a free loopback port; that port.

    Only a config file inside the sandbox (a copy the kubelet made) is touched; the Secret is not.
    """
    if not config_path:
        return None
    path = Path(config_path)
    if not path.is_file() or sandbox_root not in path.resolve().parents:
        return None
    try:
        document = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        return None  # the listener reports an unreadable config itself
    if not isinstance(document, dict) or str(document.get(key) or "") in ("", "0"):
        return None
    port = free_port()
    document[key] = f"{LOOPBACK}:{port}"
    path.write_bytes(orjson.dumps(document))
    return port


def give_probes_a_free_port(env: dict[str, str]) -> int | None:
    """Point a probe address in the listener's ``env`` (``LISTENER_PROBE_ADDR``, the port of its liveness probe)
    at a free loopback port; that port, or ``None`` when the pod asks for no probe address."""
    if env.get(PROBE_ADDR_ENV, "").strip() in ("", "0"):
        return None
    port = free_port()
    env[PROBE_ADDR_ENV] = f"{LOOPBACK}:{port}"
    return port


def _now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
