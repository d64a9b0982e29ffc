"""What the demo shows while it runs: a live panel (rich) on a terminal, one plain line per second otherwise.

Both render a :class:`DemoState`, which the scenario updates; rendering never does I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from arc_scaleset_lab.harness.scale_sets import ScaleSetSnapshot

PHASE_ORDER = ("New", "Pending", "Running", "Succeeded", "Failed", "Outdated", "Deleting")
WAITING_JOB_STATES = ("queued", "available", "acquired")


@dataclass
class DemoState:
    """Everything on screen. ``elapsed`` is seconds since the workload started (negative before)."""

    stage: str = "starting"
    elapsed: float = 0.0
    jobs_planned: int = 0
    jobs_enqueued: int = 0
    jobs_by_state: dict[str, int] = field(default_factory=dict)
    snapshot: ScaleSetSnapshot | None = None
    runners_created: int = 0
    events: list[tuple[float, str]] = field(default_factory=list)
    nodes: str | None = None  # --cold-nodes: the node pool at a glance

    def log(self, message: str) -> None:
        self.events.append((self.elapsed, message))

    @property
    def jobs_waiting(self) -> int:
        return sum(self.jobs_by_state.get(s, 0) for s in WAITING_JOB_STATES)

    @property
    def jobs_running(self) -> int:
        return self.jobs_by_state.get("running", 0)

    @property
    def jobs_done(self) -> int:
        return self.jobs_by_state.get("completed", 0)


def _phases(counts: Counter[str]) -> str:
    ordered = [p for p in PHASE_ORDER if counts.get(p)] + sorted(p for p in counts if p not in PHASE_ORDER)
    return "  ".join(f"{p} {counts[p]}" for p in ordered) or "none"


def _revisions(counts: Counter[int]) -> str:
    return "  ".join(f"rev {rev}: {n}" for rev, n in sorted(counts.items())) or "none"


def _listener(snapshot: ScaleSetSnapshot) -> str:
    if snapshot.listener_name is None:
        return "no AutoscalingListener yet"
    pod = snapshot.listener_pod_phase or "no pod"
    session = f"session held ({snapshot.session_owner})" if snapshot.session_owner else "no session"
    return f"pod {pod}, {session}"


def render(state: DemoState) -> RenderableType:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", justify="right")
    table.add_column()
    table.add_row(
        "jobs",
        f"waiting {state.jobs_waiting}   running {state.jobs_running}   done {state.jobs_done}"
        f"   (enqueued {state.jobs_enqueued}/{state.jobs_planned})",
    )
    snapshot = state.snapshot
    if snapshot is not None:
        table.add_row(
            "runners",
            f"{_phases(snapshot.by_phase())}   |   busy {snapshot.busy}, idle {snapshot.idle_running}"
            f"   |   created so far {state.runners_created}",
        )
        table.add_row("by revision", _revisions(snapshot.by_revision()))
        marker = "" if snapshot.applied_revision >= snapshot.desired_revision else "  (rolling)"
        table.add_row(
            "runner set",
            f"replicas {snapshot.replicas}   patchID {snapshot.patch_id}   revision applied "
            f"{snapshot.applied_revision} / desired {snapshot.desired_revision}{marker}",
        )
        table.add_row("listener", _listener(snapshot))
    if state.nodes is not None:
        table.add_row("nodes", state.nodes)
    recent = Text()
    for at, message in state.events[-6:]:
        recent.append(f"{at:6.0f}s  ", style="dim")
        recent.append(message + "\n")
    title = f"arc-scaleset demo  [{state.stage}]  t={state.elapsed:.0f}s"
    return Group(Panel(table, title=title, title_align="left"), Panel(recent, title="events", title_align="left"))


def plain_line(state: DemoState) -> str:
    """One line for logs and pipes."""
    line = (
        f"t={state.elapsed:5.0f}s [{state.stage}] jobs waiting={state.jobs_waiting} running={state.jobs_running} "
        f"done={state.jobs_done}/{state.jobs_planned}"
    )
    snapshot = state.snapshot
    if snapshot is not None:
        line += (
            f" | runners {len(snapshot.runners)} ({_phases(snapshot.by_phase())}) busy={snapshot.busy}"
            f" | {_revisions(snapshot.by_revision())}"
            f" | ERS replicas={snapshot.replicas} patchID={snapshot.patch_id}"
            f" revision={snapshot.applied_revision}/{snapshot.desired_revision}"
            f" | listener {_listener(snapshot)}"
        )
    if state.nodes is not None:
        line += f" | nodes {state.nodes}"
    return line
