"""The lab's cluster autoscaler: the shell around :func:`~arc_scaleset_lab.cluster.node_pool.plan_nodes`.

Each scan (every ``scan_interval`` seconds, as the real cluster autoscaler's ``--scan-interval``) lists
the pods and the pool's nodes through the project's kube client, builds the pure decision's inputs
(unschedulable pods of the pool, each node's free room and since when it has been empty, the launches in
flight), and carries out the plan: it remembers new launches, creates the Node of each launch that is
due (kwok then makes it Ready with the pool's allocatable), and removes idle nodes.

A node is removed the careful way: cordoned first (``spec.unschedulable``, so the scheduler places
nothing new on it), then its pods are listed again, and it is deleted only when still empty; otherwise
it is uncordoned and kept. While the pool has its maximum of nodes (those that exist and those on their way),
its nodes carry the label ``arc-scaleset.dev/node-pool-capped=true``: the contract by which the controller's
``--capped-node-room`` learns that no more will come (docs/capacity.md); the label goes when the pool is below
its maximum again. Launches live in this process only: a provisioner that stops forgets the
nodes it was waiting for (the pods stay unschedulable and the next provisioner launches again).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from arc_scaleset.clock import REAL_CLOCK, Clock
from arc_scaleset.controllers.ephemeralrunnerset.node_room import LABEL_NODE_POOL_CAPPED
from arc_scaleset.kube import resources
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import AlreadyExists, KubeError, NotFound
from arc_scaleset_lab.cluster.node_pool import (
    Launch,
    NodePlan,
    NodePool,
    PoolNode,
    Resources,
    WaitingPod,
    holds_node,
    is_unschedulable,
    plan_nodes,
    pod_requests,
)

log = logging.getLogger(__name__)

DEFAULT_SCAN_INTERVAL = 1.0
MAX_BACKOFF = 10.0


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def _allocatable(node: Mapping[str, Any], default: Resources) -> Resources:
    """The node's allocatable as kwok reports it, or the pool's shape before kwok has written it."""
    values = (node.get("status") or {}).get("allocatable")
    if not values:
        return default
    try:
        return Resources.parse(str(values["cpu"]), str(values["memory"]), int(values["pods"]))
    except (KeyError, ValueError):
        return default


class NodeProvisioner:
    """Grows and shrinks ``pool`` for the pods that ask for it. ``report`` receives one line per action (the
    demo shows them); ``added``/``removed`` count the nodes created and deleted; ``nodes`` are the pool's nodes
    the last scan saw and ``launches`` those on their way."""

    def __init__(
        self,
        kube: KubeClient,
        pool: NodePool,
        *,
        clock: Clock = REAL_CLOCK,
        scan_interval: float = DEFAULT_SCAN_INTERVAL,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.pool = pool
        self.clock = clock
        self.scan_interval = scan_interval
        self.report = report or log.info
        self.added = 0
        self.removed = 0
        self.launches: dict[str, Launch] = {}
        self.nodes: tuple[str, ...] = ()
        self._empty_since: dict[str, float] = {}
        self._warned: set[str] = set()
        self._serial = 0

    async def run(self) -> None:
        """Scan until cancelled; a failed scan is logged and retried after a growing pause."""
        pause = self.scan_interval
        while True:
            try:
                await self.scan()
                pause = self.scan_interval
            except KubeError as exc:
                pause = min(max(pause, 0.5) * 2, MAX_BACKOFF)
                log.warning("node provisioner scan failed (retrying in %.0fs): %s", pause, exc)
            await self.clock.sleep(pause)

    async def scan(self) -> NodePlan:
        """One pass: observe, decide, act. Returns the plan it carried out."""
        pods = (await self.kube.list(resources.PODS)).items
        nodes = (await self.kube.list(resources.NODES, label_selector=self.pool.selector)).items
        now = self.clock.monotonic()
        waiting = [WaitingPod(_key(p), pod_requests(p)) for p in pods if self.pool.wants(p) and is_unschedulable(p)]
        plan = plan_nodes(
            now,
            self.pool,
            waiting=waiting,
            nodes=self._pool_nodes(now, nodes, pods),
            launches=list(self.launches.values()),
        )
        self.nodes = tuple(_key(n) for n in nodes)
        self._launch(now, plan.launch, known=set(self.nodes), waiting=len(waiting))
        for name in plan.create:
            await self._create(name)
        for name in plan.remove:
            await self._remove(name)
        await self._mark_capped(nodes, capped=len(nodes) + len(plan.create) + len(self.launches) >= self.pool.max_nodes)
        self._warn(plan)
        return plan

    async def _mark_capped(self, nodes: Sequence[Mapping[str, Any]], *, capped: bool) -> None:
        """Label the pool's nodes as capped while it has its maximum of nodes; take the label away below it."""
        for node in nodes:
            labels = (node.get("metadata") or {}).get("labels") or {}
            if (labels.get(LABEL_NODE_POOL_CAPPED) == "true") == capped:
                continue
            value = "true" if capped else None
            with contextlib.suppress(NotFound):  # removed meanwhile
                await self.kube.patch(
                    resources.NODES, _key(node), {"metadata": {"labels": {LABEL_NODE_POOL_CAPPED: value}}}
                )

    def _pool_nodes(
        self, now: float, nodes: Sequence[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
    ) -> list[PoolNode]:
        held: dict[str, list[Mapping[str, Any]]] = {}
        for pod in pods:
            if holds_node(pod):
                held.setdefault(pod["spec"]["nodeName"], []).append(pod)
        observed = []
        for node in nodes:
            name = _key(node)
            on_node = held.get(name, [])
            if on_node:
                self._empty_since.pop(name, None)
            else:
                self._empty_since.setdefault(name, now)
            taken = sum((pod_requests(p) for p in on_node), Resources())
            observed.append(
                PoolNode(name, _allocatable(node, self.pool.shape) - taken, len(on_node), self._empty_since.get(name))
            )
        names = {node.name for node in observed}
        self._empty_since = {name: since for name, since in self._empty_since.items() if name in names}
        return observed

    def _launch(self, now: float, count: int, *, known: set[str], waiting: int) -> None:
        names = []
        for _ in range(count):
            self._serial += 1
            while (name := f"{self.pool.name}-{self._serial}") in known or name in self.launches:
                self._serial += 1
            self.launches[name] = Launch(name, started=now, due=now + self.pool.delay)
            names.append(name)
        if names:
            self.report(
                f"{_nodes(names)} launched for {waiting} unschedulable pod(s); "
                f"{'it appears' if len(names) == 1 else 'they appear'} in {self.pool.delay:g}s"
            )

    async def _create(self, name: str) -> None:
        with contextlib.suppress(AlreadyExists):  # a scan that failed after creating it
            await self.kube.create(resources.NODES, self.pool.node(name))
            self.added += 1
            self.report(f"node {name} added")
        del self.launches[name]

    async def _remove(self, name: str) -> None:
        try:
            await self.kube.patch(resources.NODES, name, {"spec": {"unschedulable": True}})
        except NotFound:  # someone else removed it
            self._empty_since.pop(name, None)
            return
        still = await self.kube.list(resources.PODS, field_selector=f"spec.nodeName={name}")
        if any(holds_node(p) for p in still.items):
            # A pod was bound between the scan and the cordon: the node is in use after all.
            await self.kube.patch(resources.NODES, name, {"spec": {"unschedulable": False}})
            self._empty_since.pop(name, None)
            return
        await self.kube.delete(resources.NODES, name, missing_ok=True)
        self._empty_since.pop(name, None)
        self.removed += 1
        self.report(f"node {name} removed (empty for {self.pool.idle:g}s)")

    def _warn(self, plan: NodePlan) -> None:
        """Say once per pod why no node comes for it (one line per reason and scan)."""
        for names, why in (
            (plan.too_big, f"each requests more than a node of pool {self.pool.name} holds"),
            (plan.at_max, f"pool {self.pool.name} is at its maximum of {self.pool.max_nodes} nodes"),
        ):
            new = [name for name in names if name not in self._warned]
            if new:
                shown = ", ".join(new[:3]) + (f" and {len(new) - 3} more" if len(new) > 3 else "")
                self.report(f"no node for {len(new)} pod(s) ({shown}): {why}")
        self._warned = {*plan.too_big, *plan.at_max}


def _nodes(names: Sequence[str]) -> str:
    return f"node {names[0]}" if len(names) == 1 else f"nodes {', '.join(names)}"
