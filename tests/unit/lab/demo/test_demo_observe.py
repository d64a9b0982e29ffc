"""``arc-scaleset demo --observe``: off by default; what it prints names the Prometheus to query."""

from __future__ import annotations

import argparse
from pathlib import Path

from arc_scaleset_lab.demo import configure
from arc_scaleset_lab.demo.observe import where
from arc_scaleset_lab.harness.prometheus import LabPrometheus


def test_observe_is_off_unless_asked() -> None:
    parser = argparse.ArgumentParser()
    configure(parser)

    assert parser.parse_args([]).observe is False
    assert parser.parse_args(["--observe"]).observe is True


def test_the_printed_lines_name_the_api_url_and_a_query_that_answers_during_the_demo(tmp_path: Path) -> None:
    server = LabPrometheus(tmp_path, binary=tmp_path / "prometheus")
    server.port = 9123

    text = "\n".join(where(server))

    assert "http://127.0.0.1:9123" in text
    assert "/api/v1/query?query=gha_desired_runners" in text
