"""``arc-scaleset demo --cold-nodes``: off by default (the demo's runner template is what it always was), and when
on, the runners request a CPU and ask for the pool whose nodes the provisioner adds."""

from __future__ import annotations

import argparse

import pytest

from arc_scaleset_lab.cluster.node_pool import POOL_LABEL, Resources, pod_requests
from arc_scaleset_lab.demo import _options, configure
from arc_scaleset_lab.demo.cold_nodes import ColdNodes
from arc_scaleset_lab.demo.scenario import DemoOptions, template
from arc_scaleset_lab.demo.view import DemoState, plain_line
from arc_scaleset_lab.harness import scale_sets


def _parse(*argv: str) -> DemoOptions:
    parser = argparse.ArgumentParser()
    configure(parser)
    return _options(parser.parse_args(list(argv)))


def test_without_cold_nodes_the_runner_template_is_what_it_always_was() -> None:
    options = _parse()
    assert options.cold is None
    assert template(1, options.cold) == scale_sets.runner_template(
        image="ghcr.io/actions/actions-runner:2.330.0", env={scale_sets.TEMPLATE_REVISION_ENV: "1"}
    )


def test_cold_nodes_flags_make_the_pool_and_put_every_runner_on_it() -> None:
    options = _parse("--cold-nodes", "--node-delay", "5", "--max-nodes", "3", "--node-size", "2", "--node-idle", "7")
    assert options.cold == ColdNodes(delay=5.0, max_nodes=3, node_size=2, idle=7.0)
    pool = options.cold.pool()
    assert (pool.delay, pool.idle, pool.max_nodes, pool.shape.cpu) == (5.0, 7.0, 3, 2)

    for revision in (1, 2):  # the template change keeps the runners on the pool
        spec = template(revision, options.cold)["spec"]
        assert spec["nodeSelector"] == {POOL_LABEL: "runners"}
        assert pool.wants({"spec": spec})
        assert pod_requests({"spec": spec}) == Resources.parse("1", "2Gi", 1)
        assert pod_requests({"spec": spec}).fits_in(pool.shape)


def test_the_cold_nodes_defaults_are_a_sixty_second_node_of_four_runners() -> None:
    cold = _parse("--cold-nodes").cold
    assert cold == ColdNodes(delay=60.0, max_nodes=10, node_size=4, idle=30.0)


@pytest.mark.parametrize("argv", [("--max-nodes", "0"), ("--node-size", "0"), ("--node-delay", "-1")])
def test_a_cold_nodes_flag_out_of_range_is_refused(argv: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="--max-nodes >= 1"):
        _parse("--cold-nodes", *argv)


def test_the_summary_line_says_how_many_nodes_came_and_went() -> None:
    line = ColdNodes(delay=60.0, max_nodes=4, node_size=4).summary_line(added=3, removed=2)
    assert line.startswith("cold nodes:            3 added, 2 removed")
    assert "60s" in line


def test_the_status_line_shows_the_node_pool_only_with_cold_nodes() -> None:
    state = DemoState()
    assert "nodes" not in plain_line(state)
    state.nodes = ColdNodes(max_nodes=5, node_size=2).nodes_line(["runners-1"], ["runners-2", "runners-3"])
    assert plain_line(state).endswith(" | nodes 1 up, 2 coming (at most 5 of 2 CPUs)")
