"""The local control plane as a test resource: start one (or reuse a running one), install CRDs, wait.

Used by the pytest fixtures, the benchmarks and the end-to-end suite so that all of them start and
stop the cluster the same way.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arc_scaleset.api.crd.generate import custom_resource_definitions
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient, PatchType
from arc_scaleset.kube.errors import NotFound
from arc_scaleset_lab.cluster import binaries
from arc_scaleset_lab.cluster.localcluster import LocalCluster, memory_dir, read_state, stop_recorded
from arc_scaleset_lab.cluster.processes import pid_alive
from arc_scaleset_lab.harness.waiting import eventually


@dataclass(frozen=True)
class TestCluster:
    """A running control plane: where its API is and how to reach it."""

    __test__ = False  # not a test class, despite the name

    server: str
    kubeconfig: Path
    workdir: Path
    pids: dict[str, int]


WORKDIR_PREFIX = "arc-scaleset-cluster-"


def reap_abandoned_clusters(base: Path) -> list[Path]:
    """Remove the work directories (and etcd data) that test clusters left in ``base`` when their run was killed
    before it could remove them: those whose recorded processes are all dead. They live in memory (/dev/shm),
    about 125 MB each, until a reboot. A directory with no ``state.json`` may be a cluster starting right now,
    and a recorded process that lives (or whose PID was reused) keeps its directory: both are left."""
    reaped = []
    for workdir in base.glob(f"{WORKDIR_PREFIX}*"):
        try:
            state = read_state(workdir)
        except (OSError, ValueError):
            continue
        if state is None or any(pid and pid_alive(pid) for pid in state.get("pids", {}).values()):
            continue
        stop_recorded(workdir)  # stops nothing (all dead); removes the etcd data and the state
        shutil.rmtree(workdir, ignore_errors=True)
        reaped.append(workdir)
    return reaped


@contextmanager
def start_test_cluster(*, reuse: Path | None = None) -> Iterator[TestCluster]:
    """Yield a running cluster: the one recorded in ``reuse`` if it is alive, else a new one, stopped after.

    A new cluster's processes die with this process even if it is killed (see processes.py), and an
    ``atexit`` hook stops them when the interpreter exits without running the finally clause.
    """
    if reuse is not None:
        state = read_state(reuse)
        if not state or not all(pid and pid_alive(pid) for pid in state["pids"].values()):
            raise RuntimeError(
                f"no running cluster recorded in {reuse}: start one with `arc-scaleset cluster up --dir {reuse}`"
            )
        yield TestCluster(
            server=state["server"], kubeconfig=Path(state["kubeconfig"]), workdir=reuse, pids=dict(state["pids"])
        )
        return
    bin_dir = binaries.build()
    base = memory_dir()
    if base is not None:
        reap_abandoned_clusters(base)
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=base))
    local = LocalCluster(workdir, bin_dir=bin_dir)
    atexit.register(local.stop)
    try:
        info = local.start(tie_to_parent=True)  # a start that fails is cleaned up too
        yield TestCluster(
            server=info.server,
            kubeconfig=info.kubeconfig,
            workdir=workdir,
            pids={p.name: p.pid for p in local.processes if p.pid},
        )
    finally:
        local.stop()
        atexit.unregister(local.stop)
        # The work directory lives in /dev/shm (memory): a test run must not leave it behind.
        shutil.rmtree(workdir, ignore_errors=True)


async def install_crds(
    kube: KubeClient, crds: Iterable[Mapping[str, Any]] | None = None, *, timeout: float = 60
) -> list[str]:
    """Server-side apply ``crds`` (default: this version's) and wait until each is Established and served.

    This version's CRDs are generated in process (:func:`arc_scaleset.api.crd.generate.custom_resource_definitions`,
    what ``arc-scaleset crds`` prints and ``config/crd/`` holds), so the lab needs no checkout.
    """
    names: list[str] = []
    for doc in custom_resource_definitions() if crds is None else crds:
        name = doc["metadata"]["name"]
        await kube.patch(
            resources.CUSTOM_RESOURCE_DEFINITIONS,
            name,
            doc,
            patch_type=PatchType.APPLY,
            field_manager="arc-scaleset-tests",
            force=True,
        )
        names.append(name)

    async def all_established() -> bool:
        for name in names:
            try:
                crd = await kube.get(resources.CUSTOM_RESOURCE_DEFINITIONS, name)
            except NotFound:
                return False
            conditions = (crd.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    await eventually(all_established, f"CRDs {names} to be Established", timeout=timeout)
    return names
