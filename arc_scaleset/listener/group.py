"""A shared listener: one process serving every member of a group (docs/listener.md, "Shared listener (process)").

:class:`SharedListener` watches the group's config Secret through the API server (an informer on that one
Secret: bounded backoff on errors, a relist when the watch falls behind) and keeps one
:class:`~arc_scaleset.listener.group_member.Member` per data key: after each change of the Secret it asks
:func:`~arc_scaleset.listener.group_plan.plan_members` what to do and does it, stopping (session deleted) the
members that left or changed before starting the ones that came or changed. A member whose config did not
change is never touched. :meth:`SharedListener.run` returns when it is told to stop, after every member has
stopped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from arc_scaleset.api.listener_config import ListenerConfig
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.informer import Informer
from arc_scaleset.kube.resources import SECRETS
from arc_scaleset.listener.group_member import Member, MemberContext
from arc_scaleset.listener.group_plan import GroupPlan, group_liveness, group_readiness, plan_members, wanted_members
from arc_scaleset.listener.stop import StopSignal

log = logging.getLogger("arc_scaleset.listener")


class SharedListener:
    """The members of the group whose config Secret is ``namespace``/``secret``."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        secret: str,
        namespace: str,
        context: MemberContext,
    ) -> None:
        self.secret = secret
        self.namespace = namespace
        self._context = context
        self.informer = Informer(
            kube, SECRETS, namespace=namespace, field_selector=f"metadata.name={secret}", clock=context.clock
        )
        self.members: dict[str, Member] = {}
        self._changed = asyncio.Event()

    # ---- probes ---------------------------------------------------------------------------------------------

    def live(self) -> tuple[bool, str]:
        """``/healthz``: see :func:`~arc_scaleset.listener.group_plan.group_liveness`."""
        progress = [member.progress for member in self.members.values()]
        return group_liveness(
            progress, now=self._context.clock.monotonic(), window=self._context.timing.liveness_window
        )

    def ready(self) -> tuple[bool, str]:
        """``/readyz``: see :func:`~arc_scaleset.listener.group_plan.group_readiness`."""
        return group_readiness([member.session_held for member in self.members.values()])

    def first_config(self) -> ListenerConfig | None:
        """The readable config of the first member by name: where the process-wide settings (metrics address,
        log level and format) come from; the controller writes them alike for every member of a group."""
        return next((self.members[name].config for name in sorted(self.members) if self.members[name].config), None)

    # ---- running --------------------------------------------------------------------------------------------

    async def run(self, stop: StopSignal, *, on_applied: Callable[[], Awaitable[None]] | None = None) -> None:
        """Serve the group until ``stop`` is set; then stop every member (each deletes its session) and return.

        ``on_applied`` is awaited after each change of membership (the command starts the metrics server once a
        member names its address).
        """
        wake = self._changed.set
        registration = self.informer.add_handler(
            on_add=lambda _: wake(), on_update=lambda _old, _new: wake(), on_delete=lambda _: wake()
        )
        self.informer.start()
        log.info("shared listener watching its config Secret", extra={"secret": f"{self.namespace}/{self.secret}"})
        try:
            while await self._next_change(stop):
                self._changed.clear()
                plan = await self.apply(self.informer.store.get(self.namespace, self.secret))
                if on_applied is not None and not plan.empty:
                    await on_applied()
        finally:
            registration.remove()
            await self.informer.stop()
            await self._stop_members(list(self.members))
        log.info("shared listener stopped")

    async def _next_change(self, stop: StopSignal) -> bool:
        """Wait for a change of the Secret (True) or for ``stop`` (False)."""
        if stop.is_set():
            return False
        changed = asyncio.ensure_future(self._changed.wait())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({changed, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            stopped.cancel()
        return not stop.is_set()

    async def apply(self, secret: Mapping[str, Any] | None) -> GroupPlan:
        """Bring the members in line with ``secret`` (the config Secret as read, ``None`` when it is gone)."""
        wanted = wanted_members(secret)
        plan = plan_members(wanted, {name: member.digest for name, member in self.members.items()})
        if plan.empty:
            return plan
        log.info(
            "shared listener members changing",
            extra={"start": list(plan.start), "stop": list(plan.stop), "replace": list(plan.replace)},
        )
        # Stop first: a replaced member's new listener must find its old session deleted, not held.
        await self._stop_members([*plan.stop, *plan.replace])
        for name in (*plan.start, *plan.replace):
            member = self.members[name] = Member(name, wanted[name], self._context)
            member.start()
        return plan

    async def _stop_members(self, names: list[str]) -> None:
        # All at once: each member's shutdown is bounded (session delete, final state write), and on SIGTERM the
        # sum of a hundred of them would not fit in the pod's grace period.
        members = [self.members.pop(name) for name in names if name in self.members]
        await asyncio.gather(*(member.stop() for member in members))
