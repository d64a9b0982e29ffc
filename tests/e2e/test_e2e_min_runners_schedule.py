"""minRunnersSchedule as a user runs it (ARC #3313): while a window is open the scale set keeps the window's
runners idle and registered, and when it closes the set goes back to minRunners -- no CronJob, no restart.

The window is placed around the test's own "now" in a zone the test chooses (Asia/Kolkata, UTC+05:30, so the
window's wall-clock times differ from the machine's and from UTC): opened a minute ago, closing 75 to 135 seconds
from now. The waits are on the scale set's state, never on time."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from tests.e2e.harness import ScaleSetFactory

ZONE = ZoneInfo("Asia/Kolkata")
SETTLE = dt.timedelta(seconds=75)
"""Time the set has to reach the window's runners before it closes (the window ends on a minute boundary)."""


async def test_an_open_window_keeps_its_runners_idle_and_the_set_drops_to_min_runners_when_it_closes(
    scale_set: ScaleSetFactory,
) -> None:
    now = dt.datetime.now(ZONE).replace(second=0, microsecond=0)
    closes = now + dt.timedelta(minutes=2)
    if closes - dt.datetime.now(ZONE) < SETTLE:
        closes += dt.timedelta(minutes=1)
    window = {
        "days": "*",
        "start": (now - dt.timedelta(minutes=1)).strftime("%H:%M"),
        "end": closes.strftime("%H:%M"),
        "timeZone": "Asia/Kolkata",
        "runners": 3,
    }
    runners = await scale_set.create(min_runners=1, max_runners=5, min_runners_schedule=[window])

    held = await runners.wait(
        lambda s: s.session_owner and s.replicas == 3 and s.idle_running == 3,
        timeout=(closes - dt.datetime.now(ZONE)).total_seconds() - 10,
        what="the window's 3 idle runners while it is open",
    )
    assert len(await runners.registered_runner_names()) == 3
    assert len(held.live_runners()) == 3

    settled = await runners.wait(
        lambda s: s.settled_at(runners.min_runners),
        timeout=(closes - dt.datetime.now(ZONE)).total_seconds() + 90,
        what="the set back at minRunners (1 idle runner) after the window closed",
    )
    assert dt.datetime.now(ZONE) >= closes
    assert len(settled.live_runners()) == 1
