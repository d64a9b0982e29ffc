"""The lab Prometheus's configuration and targets (arc_scaleset_lab/harness/prometheus.py) and the key its
binary is cached under (arc_scaleset_lab/cluster/prometheus_binary.py): pure functions, no process."""

from __future__ import annotations

from pathlib import Path

import pytest

from arc_scaleset_lab.cluster import prometheus_binary
from arc_scaleset_lab.harness.prometheus import ScrapeTarget, config_document, targets_document


def test_each_target_is_a_file_sd_group_with_its_own_metrics_path_and_component() -> None:
    document = targets_document(
        [
            ScrapeTarget("controller", "http://127.0.0.1:4100/metrics"),
            ScrapeTarget("listener", "http://127.0.0.1:4200/custom/path"),
        ]
    )

    assert document == [
        {"targets": ["127.0.0.1:4100"], "labels": {"__metrics_path__": "/metrics", "component": "controller"}},
        {"targets": ["127.0.0.1:4200"], "labels": {"__metrics_path__": "/custom/path", "component": "listener"}},
    ]


def test_a_target_without_a_path_is_scraped_at_slash_metrics() -> None:
    (group,) = targets_document([ScrapeTarget("listener", "http://127.0.0.1:4200")])
    assert group["labels"]["__metrics_path__"] == "/metrics"


def test_the_config_reads_the_targets_file_and_loads_the_rule_files_at_the_given_intervals() -> None:
    config = config_document(
        targets_file=Path("/w/targets.json"),
        rule_files=[Path("/w/a.rules.yaml")],
        scrape_interval=0.5,
        evaluation_interval=2,
    )

    assert config["global"] == {"scrape_interval": "500ms", "scrape_timeout": "500ms", "evaluation_interval": "2000ms"}
    assert config["rule_files"] == ["/w/a.rules.yaml"]
    (job,) = config["scrape_configs"]
    assert job["file_sd_configs"][0]["files"] == ["/w/targets.json"]
    assert "alerting" not in config  # alerts are read from /api/v1/alerts, there is no alertmanager


@pytest.mark.parametrize("seconds", [0.0, 0.0001])
def test_an_interval_is_never_rounded_to_zero(seconds: float) -> None:
    config = config_document(targets_file=Path("t"), rule_files=[], scrape_interval=seconds, evaluation_interval=1)
    assert config["global"]["scrape_interval"] == "1ms"


def test_the_binary_is_cached_beside_the_control_plane_under_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARC_SCALESET_CACHE", str(tmp_path))

    directory = prometheus_binary.bin_dir()

    assert directory.parent == tmp_path / "prometheus"
    assert directory.name.startswith(f"prometheus-{prometheus_binary.PROMETHEUS_VERSION}_")
    assert not prometheus_binary.is_built(directory)
