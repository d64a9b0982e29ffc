"""Following one kind of object through a list and a watch, for harness parts that must not miss a short-lived
object (a poll could miss a runner or a pod that lives for less than one period)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.errors import Gone, KubeError
from arc_scaleset.kube.resources import Resource

log = logging.getLogger(__name__)

RELIST_DELAY = 0.5
"""Seconds before listing again after a failed list or watch (an expired watch relists at once)."""


async def follow(
    kube: KubeClient, resource: Resource, *, namespace: str, seen: Callable[[dict[str, Any]], None], what: str
) -> None:
    """Call ``seen`` with every object of ``resource`` in ``namespace`` as listed, then as each watch event adds
    or modifies it, for ever (cancel the task to stop). Deletions are not reported: ``seen`` has had the object's
    last state. An expired watch relists at once; a failed one after :data:`RELIST_DELAY` (``what`` names the
    follower in the warning)."""
    while True:
        try:
            listed = await kube.list(resource, namespace=namespace)
            for item in listed.items:
                seen(item)
            async for event in kube.watch(resource, namespace=namespace, resource_version=listed.resource_version):
                if event.type in ("ADDED", "MODIFIED"):
                    seen(event.object)
        except Gone:
            continue
        except KubeError as error:
            log.warning("%s: watch failed, relisting: %s", what, error)
            await asyncio.sleep(RELIST_DELAY)
