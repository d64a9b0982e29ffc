"""The lab finds a config URL whose listener name collides with another scale set's (8 digits of FNV-32a are no
defence), so the tenancy tests can show what the controller does with such a pair."""

from __future__ import annotations

from arc_scaleset.api.naming import autoscaling_listener_name
from arc_scaleset_lab.harness.name_collisions import colliding_config_url


def test_a_colliding_url_gives_a_scale_set_of_another_namespace_the_same_listener_name() -> None:
    url = colliding_config_url(
        name="arc-runners", namespace="team-a", runner_group="", config_url="http://127.0.0.1:40001/org",
        other_namespace="team-b", other_url_prefix="http://127.0.0.1:40001/org-",
    )  # fmt: skip
    assert url.startswith("http://127.0.0.1:40001/org-")
    assert autoscaling_listener_name(
        "arc-runners", namespace="team-b", runner_group="", github_config_url=url
    ) == autoscaling_listener_name(
        "arc-runners", namespace="team-a", runner_group="", github_config_url="http://127.0.0.1:40001/org"
    )
