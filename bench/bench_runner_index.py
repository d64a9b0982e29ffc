"""The EphemeralRunnerSet's runner classification over a scale-down of N runners: a pass that classifies every
runner of the set again against one that reads only the runners that changed (issue 20).

    .venv/bin/python bench/bench_runner_index.py [--runners 200 1000 2000] [--per-pass 8] [--rounds 3]

A scale-down brings a pass of the set every few runner events (each runner is first marked deleting, then
deleted: 2 events per runner; 1,000 runners brought about 240 passes, one per ~8 events). Both sides replay
the same events against a dict standing in for the informer's cache, and make a pass every ``--per-pass``
events:

* **full**: what a pass did before ``runner_index``: every runner of the set looked at, its view reused when
  its resourceVersion did not change (parsed again otherwise), the runners this set deleted shown as
  deleting (``DeletionExpectations.mark``), and all of them sorted by state (``classify``);
* **index**: ``SetRunners``: told which runners changed, it reads those and copies its kept state lists.

Figures: CPU seconds (``time.process_time``) of the whole scale-down per side, best of ``--rounds``, and the
ratio full/index. The full side grows with the square of N (N/8 passes of N runners), the index side with N.
No cluster needed; about five CPU-seconds at the defaults.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from arc_scaleset.controllers.ephemeralrunnerset.expectations import DeletionExpectations
from arc_scaleset.controllers.ephemeralrunnerset.runner_index import SetRunners
from arc_scaleset.controllers.runner_classification import RunnerView, classify
from arc_scaleset.kube.ownerrefs import Owner
from arc_scaleset.kube.views import ObjectView

NAMESPACE, SET_UID = "runners", "set-uid"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
Key = tuple[str, str]


def runner(index: int, version: int, *, deleting: bool) -> dict[str, Any]:
    """An idle registered runner of the set, as the cache holds it (20 created per second)."""
    meta: dict[str, Any] = {
        "name": f"arc-runner-{index:05d}",
        "namespace": NAMESPACE,
        "uid": f"uid-{index}",
        "resourceVersion": str(version),
        "creationTimestamp": (T0 + dt.timedelta(seconds=index // 20)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "ownerReferences": [
            {
                "apiVersion": "actions.github.com/v1alpha1",
                "kind": "EphemeralRunnerSet",
                "name": "arc",
                "uid": SET_UID,
                "controller": True,
            }
        ],
        "annotations": {"actions.github.com/patch-id": "0"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    return {"metadata": meta, "status": {"phase": "Running", "runnerId": index + 1}}


class Cache:
    """The two reads a pass makes, over the objects the replay keeps current."""

    def __init__(self, objects: dict[Key, dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, namespace: str | None, name: str) -> Mapping[str, Any] | None:
        return self.objects.get((namespace or "", name))

    def by_owner(self, uid: str) -> list[Mapping[str, Any]]:
        return list(self.objects.values())


def scale_down(count: int) -> Iterator[tuple[Key, dict[str, Any] | None]]:
    """The scale-down's events: every runner marked deleting, then every runner gone."""
    version = 1
    for index in range(count):
        version += 1
        yield (NAMESPACE, f"arc-runner-{index:05d}"), runner(index, version, deleting=True)
    for index in range(count):
        yield (NAMESPACE, f"arc-runner-{index:05d}"), None


def full_side() -> Callable[[Cache, list[Key]], None]:
    """A pass that looks at every runner (views kept per UID and resourceVersion) and classifies them all."""
    kept: dict[str, tuple[str, RunnerView]] = {}
    deletions = DeletionExpectations()

    def do_pass(cache: Cache, changed: list[Key]) -> None:
        nonlocal kept
        fresh: dict[str, tuple[str, RunnerView]] = {}
        views = []
        for obj in cache.by_owner(SET_UID):
            seen = ObjectView(obj)
            known = kept.get(seen.uid)
            view = known[1] if known is not None and known[0] == seen.resource_version else RunnerView.of(obj)
            fresh[seen.uid] = (seen.resource_version, view)
            views.append(view)
        kept = fresh
        classify(deletions.mark(views), applied_revision=0)

    return do_pass


def index_side() -> Callable[[Cache, list[Key]], None]:
    index = SetRunners(Owner(NAMESPACE, "actions.github.com", "EphemeralRunnerSet", "arc", SET_UID))
    deletions = DeletionExpectations()

    def do_pass(cache: Cache, changed: list[Key]) -> None:
        for key in changed:
            index.changed(*key)
        index.refresh(cache)
        index.states(applied_revision=0, deleting=deletions.unseen(index.view))

    return do_pass


def replay(count: int, per_pass: int, make: Callable[[], Callable[[Cache, list[Key]], None]]) -> tuple[float, int]:
    """CPU seconds of the passes of one scale-down of ``count`` runners (the replay's own work not counted)."""
    cache = Cache({(NAMESPACE, f"arc-runner-{i:05d}"): runner(i, 1, deleting=False) for i in range(count)})
    do_pass = make()
    do_pass(cache, [])  # the set as it was before the scale-down
    events = list(scale_down(count))
    spent, passes, changed = 0.0, 0, []
    for number, (key, obj) in enumerate(events, 1):
        if obj is None:
            cache.objects.pop(key, None)
        else:
            cache.objects[key] = obj
        changed.append(key)
        if number % per_pass == 0 or number == len(events):
            started = time.process_time()
            do_pass(cache, changed)
            spent += time.process_time() - started
            passes += 1
            changed = []
    return spent, passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runners", type=int, nargs="+", default=[200, 1000, 2000])
    parser.add_argument("--per-pass", type=int, default=8, help="runner events per pass of the set (default 8)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"scale-down of N runners, a pass every {args.per_pass} runner events; CPU seconds, best of {args.rounds}")
    for count in args.runners:
        full = min(replay(count, args.per_pass, full_side) for _ in range(args.rounds))
        index = min(replay(count, args.per_pass, index_side) for _ in range(args.rounds))
        print(
            f"  {count:>6} runners, {full[1]} passes: full {full[0]:.3f} s ({1000 * full[0] / full[1]:.3f} ms/pass),"
            f" index {index[0]:.3f} s ({1000 * index[0] / index[1]:.3f} ms/pass); ratio full/index"
            f" {full[0] / max(index[0], 1e-9):.1f}"
        )


if __name__ == "__main__":
    main()
