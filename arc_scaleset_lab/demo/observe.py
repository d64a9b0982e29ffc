"""``arc-scaleset demo --observe``: the lab's Prometheus scraping the demo's controller and listener.

The controller runs with listener metrics on (the node agent gives each listener's metrics server a free loopback
port); Prometheus follows the listeners as they come and go by rewriting its targets file every
:data:`FOLLOW_SECONDS`. It lives as long as the demo's processes do and is stopped by its PID with them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from arc_scaleset.tasks import cancel_and_wait
from arc_scaleset_lab.cluster import prometheus_binary
from arc_scaleset_lab.harness.prometheus import LabPrometheus, system_targets
from arc_scaleset_lab.harness.system import System

FOLLOW_SECONDS: Final = 2.0
LISTENER_METRICS_ARGS: Final = ("--listener-metrics-addr=:8080",)
"""Controller flags that turn listener metrics on (after the harness's ``=0``: the last one wins)."""


@contextlib.asynccontextmanager
async def observed(system: System, workdir: Path) -> AsyncIterator[LabPrometheus]:
    """Prometheus (built on first use) scraping ``system`` for the duration of the block."""
    binary = await asyncio.to_thread(prometheus_binary.build)
    server = LabPrometheus(workdir / "prometheus", binary=binary)
    await server.start()
    following = asyncio.create_task(_follow(server, system), name="prometheus-targets")
    try:
        yield server
    finally:
        await cancel_and_wait(following)
        server.stop()


async def _follow(server: LabPrometheus, system: System) -> None:
    while True:
        server.set_targets(system_targets(system))
        await asyncio.sleep(FOLLOW_SECONDS)


def where(server: LabPrometheus) -> list[str]:
    """What to print: where to query it, with a query that works during the demo."""
    return [
        f"  Prometheus at {server.url} (its HTTP API; scraping the controller and the listener every second)",
        f"    curl '{server.url}/api/v1/query?query=gha_desired_runners'",
    ]


async def scraped(server: LabPrometheus) -> str:
    """One summary line: the targets up and the ``gha_*`` series Prometheus holds now."""
    up = await server.query("count(up == 1)")
    series = await server.query('count({__name__=~"gha_.+"})')
    count = int(float(series[0]["value"][1])) if series else 0
    targets = int(float(up[0]["value"][1])) if up else 0
    return f"  prometheus:            {count} gha_* series from {targets} targets up ({server.url})"
