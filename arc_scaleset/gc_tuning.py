"""Keep Python's garbage collector away from the objects a process builds at start-up."""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Exempt every object alive now (imported modules, models, schemas, settings) from future collections.

    A full collection scans every tracked object; start-up alone leaves tens of thousands, so each full
    collection during a burst of work (a scale-up) costs tens of milliseconds to re-prove that the
    modules are still alive. Call once, after start-up and before the work begins; objects created later
    are collected as usual.
    """
    gc.collect()
    gc.freeze()
