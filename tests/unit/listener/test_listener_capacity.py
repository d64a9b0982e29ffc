"""The listener advertises what the cluster can give its set (docs/capacity.md): ``X-ScaleSetMaxCapacity`` is
``maxRunners`` lowered to the ``status.advertisedCapacity`` the controller published on the set."""

from __future__ import annotations

import pytest

from arc_scaleset.listener.capacity import advertised_capacity, cluster_capacity
from arc_scaleset.listener.metrics import ADVERTISED_CAPACITY
from tests.unit.fakes import session
from tests.unit.listener.fakes import Harness, stats


async def test_the_poll_advertises_the_capacity_the_controller_published_on_the_set() -> None:
    h = Harness(max_runners=20, with_metrics=True)
    h.patcher.ers_status = {"advertisedCapacity": 5}
    h.actions.session_stats = stats(0)
    h.start()
    await h.settle(lambda: bool(h.calls("poll")))
    assert h.calls("poll") == [("poll", session(1), 0, 5)]
    assert h.metrics is not None
    assert (
        h.metrics.registry.get_sample_value(
            ADVERTISED_CAPACITY,
            {"enterprise": "", "organization": "octo", "repository": "", "name": "set-a", "namespace": "arc"},
        )
        == 5
    )
    await h.stop_and_wait()


@pytest.mark.parametrize(
    ("status", "expected"),
    [({}, 20), ({"advertisedCapacity": 50}, 20), ({"advertisedCapacity": 0}, 0), ({"advertisedCapacity": -1}, 20),
     ({"advertisedCapacity": "5"}, 20), ({"advertisedCapacity": True}, 20)],
)  # fmt: skip
def test_max_runners_is_advertised_unless_a_valid_lower_figure_is_published(
    status: dict[str, object], expected: int
) -> None:
    assert advertised_capacity(20, cluster_capacity({"status": status})) == expected
