"""A controller's own writes of one object, remembered until its cache shows them (docs/controllers.md, "The
shape of a pass").

A write that carries the ``resourceVersion`` it was made against is refused (409) when the object moved on since;
the pass then reads the object again and retries: three requests for one. A controller's cache shows its own
previous writes only once the watch brings them back, so a pass that writes an object twice (a finalizer, then
its status), or the pass right after a write, would meet that refusal from its own write.

:class:`OwnWrites` keeps the object the last write returned, and every version of it this controller's writes
replaced. :meth:`OwnWrites.freshest` answers, for the object as the cache shows it, the fresher of the two: the
write's result while the cache still shows a version those writes replaced, else the cache's object (the cache
caught up, or somebody else wrote since: then the memory is dropped). ResourceVersions are only compared for
equality, never ordered (they are opaque).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arc_scaleset.kube.informer import Object
from arc_scaleset.kube.views import ObjectView


@dataclass
class OwnWrites:
    """The object as this controller last wrote it, and the versions of it its writes replaced."""

    stored: Object | None = None
    replaced: set[str] = field(default_factory=set)

    def wrote(self, against: Object, stored: Object) -> None:
        """Record a write made to ``against`` (the object as the writer read it) that the server answered with
        ``stored``."""
        self.replaced.add(ObjectView(against).resource_version)
        self.stored = stored

    def freshest(self, cached: Object) -> Object:
        """``cached``, or the object the last write returned while ``cached`` is a version the writes replaced."""
        if self.stored is not None and ObjectView(cached).resource_version in self.replaced:
            return self.stored
        self.stored, self.replaced = None, set()
        return cached
