"""The Events of an AutoscalingListener pass: on the listener, and, for what users must see, on its scale set."""

from __future__ import annotations

from arc_scaleset.api.views import AutoscalingListenerView
from arc_scaleset.kube.events import EventRecorder, EventType
from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.manager import Cache


class ListenerEvents:
    """Records a listener's Events; ``scale_sets`` is the AutoscalingRunnerSet cache (where users look first)."""

    def __init__(self, recorder: EventRecorder, scale_sets: Cache) -> None:
        self.recorder = recorder
        self.scale_sets = scale_sets

    async def normal(self, listener: Object, reason: str, note: str, *, action: str) -> None:
        """A Normal Event on the listener alone."""
        await self.on_listener(listener, "Normal", reason, note, action=action)

    async def on_listener(self, listener: Object, type: EventType, reason: str, note: str, *, action: str) -> None:
        """An Event on the listener alone."""
        await self.recorder.event(listener, type=type, reason=reason, note=note, action=action)

    async def warning(self, listener: Object, reason: str, note: str, *, action: str) -> None:
        """A Warning on the listener and on its AutoscalingRunnerSet (``listener: <note>`` there)."""
        await self.on_both(listener, "Warning", reason, note, scale_set_note=f"listener: {note}", action=action)

    async def on_both(
        self, listener: Object, type: EventType, reason: str, note: str, *, scale_set_note: str, action: str
    ) -> None:
        """An Event on the listener and, when the cache shows it, on the AutoscalingRunnerSet its spec names."""
        await self.recorder.event(listener, type=type, reason=reason, note=note, action=action)
        view = AutoscalingListenerView(listener)
        scale_set = self.scale_sets.get(view.scale_set_namespace, view.scale_set_name)
        if scale_set is not None:
            await self.recorder.event(scale_set, type=type, reason=reason, note=scale_set_note, action=action)
