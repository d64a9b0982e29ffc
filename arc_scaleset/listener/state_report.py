"""The listener's state on its EphemeralRunnerSet: written beside the loop, read once at start (docs/listener.md).

:class:`StateReporter` keeps the annotation :data:`~arc_scaleset.api.keys.ANNOTATION_LISTENER_STATE` on the
EphemeralRunnerSet in step with :class:`~arc_scaleset.listener.health.Health`'s state changes. Writing never
holds up the loop: :meth:`StateReporter.report` only records the latest state, and one task writes it (a
JSON merge patch of the annotation alone), retrying with backoff until it lands; a state superseded while a
write was failing is never written. :meth:`StateReporter.read_recorded` reads what the previous listener
left, with a merge patch that changes nothing (the listener's Role grants ``patch`` on its set, not ``get``;
the API server answers a patch with the object).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from arc_scaleset.api.constants import EPHEMERAL_RUNNER_SETS
from arc_scaleset.api.keys import ANNOTATION_LISTENER_CURSOR, ANNOTATION_LISTENER_STATE
from arc_scaleset.api.listener_cursor import ListenerCursor
from arc_scaleset.api.listener_state import ListenerState
from arc_scaleset.backoff import Backoff
from arc_scaleset.clock import Clock
from arc_scaleset.kube.client import PatchType
from arc_scaleset.kube.views import ObjectView
from arc_scaleset.listener.errors import error_class, is_retryable
from arc_scaleset.listener.scaler import ResourcePatcher

log = logging.getLogger(__name__)


def state_patch(state: ListenerState) -> dict[str, Any]:
    """The merge patch that records ``state`` and touches nothing else."""
    return {"metadata": {"annotations": {ANNOTATION_LISTENER_STATE: state.to_annotation()}}}


class StateReporter:
    """Writes the latest reported state to the EphemeralRunnerSet, one write at a time, beside the loop."""

    def __init__(
        self,
        kube: ResourcePatcher,
        *,
        namespace: str,
        ephemeral_runner_set: str,
        clock: Clock,
        call_timeout: float = 30.0,
    ) -> None:
        self._kube = kube
        self.namespace = namespace
        self.ephemeral_runner_set = ephemeral_runner_set
        self._clock = clock
        self._call_timeout = call_timeout
        self._latest: ListenerState | None = None
        self.written: ListenerState | None = None
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None

    async def read_recorded(self, *, within: float = 10.0) -> ListenerState | None:
        """The state the set's previous listener recorded; None when there is none or it cannot be read."""
        return (await self.read_record(within=within))[0]

    async def read_record(self, *, within: float = 10.0) -> tuple[ListenerState | None, ListenerCursor | None]:
        """The state and the message cursor (api/listener_cursor.py) the set's previous listener recorded, each
        None when there is none or it cannot be read."""
        try:
            async with asyncio.timeout(within):
                obj = await self._kube.patch(
                    EPHEMERAL_RUNNER_SETS,
                    self.ephemeral_runner_set,
                    {},
                    namespace=self.namespace,
                    patch_type=PatchType.MERGE,
                )
        except Exception as exc:
            if not is_retryable(exc):
                raise
            log.info(
                "cannot read the state the previous listener recorded; not taking over its session",
                extra={"error": str(exc) or error_class(exc)},
            )
            return None, None
        view = ObjectView(obj)
        return (
            ListenerState.from_annotation(view.annotation(ANNOTATION_LISTENER_STATE)),
            ListenerCursor.from_annotation(view.annotation(ANNOTATION_LISTENER_CURSOR)),
        )

    def report(self, state: ListenerState) -> None:
        """Record ``state`` as the one to write; returns at once (callable from synchronous code)."""
        self._latest = state
        self._wake.set()
        if self._writer is None:
            try:
                self._writer = asyncio.get_running_loop().create_task(self._write_forever())
            except RuntimeError:  # no running loop (built but not started): written once one runs
                self._writer = None

    async def aclose(self, *, within: float = 5.0) -> bool:
        """Write the latest state if it is not written yet (at most ``within`` seconds), then stop the writer.

        Never raises; True when the latest state is on the set.
        """
        await self._stop_writer()
        latest = self._latest
        if latest is None or latest == self.written:
            return True
        try:
            async with asyncio.timeout(within):
                await self._write(latest)
        except Exception as exc:
            log.warning("could not record the listener's final state", extra={"error": str(exc) or error_class(exc)})
            return False
        return True

    async def discard(self) -> None:
        """Stop the writer and write nothing more: this process lost the standby Lease, and the state on the set is
        its successor's to write (docs/listener.md, "Standby listener")."""
        await self._stop_writer()
        self._latest = None

    async def _stop_writer(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
            self._writer = None

    async def _write_forever(self) -> None:
        backoff = Backoff(base=1.0, cap=120.0, jitter=0.2)
        while True:
            await self._wake.wait()
            self._wake.clear()
            state = self._latest
            if state is None or state == self.written:
                continue
            try:
                async with asyncio.timeout(self._call_timeout):
                    await self._write(state)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.next_delay()
                log.warning(
                    "could not record the listener's state on the EphemeralRunnerSet; retrying",
                    extra={"error": str(exc) or error_class(exc), "retry_in_s": round(delay, 1)},
                )
                await self._clock.sleep(delay)
                self._wake.set()  # whatever is latest by then
                continue
            backoff.reset()

    async def _write(self, state: ListenerState) -> None:
        await self._kube.patch(
            EPHEMERAL_RUNNER_SETS,
            self.ephemeral_runner_set,
            state_patch(state),
            namespace=self.namespace,
            patch_type=PatchType.MERGE,
        )
        self.written = state
        log.debug("recorded the listener's state", extra={"state": state.state, "session_id": state.session_id})
