"""Loading and validating the listener's config.json (ARC's format, spec 3.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from arc_scaleset.listener.config import (
    MAX_INT32,
    ConfigError,
    ListenerConfig,
    config_from_mapping,
    config_path_from_environment,
    load_config,
    parse_config,
)

TOKEN = "ghp_s3cr3tTOKENvalue"
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIsecret\n-----END RSA PRIVATE KEY-----\n"

# Exactly what ARC's AutoscalingListener controller writes for a PAT (spec 1.11), byte for byte in layout.
ARC_WRITTEN_PAT_CONFIG = (
    '{"configure_url":"https://github.com/my-org","vault_type":"","vault_lookup_key":"","github_app_id":"",'
    '"github_app_installation_id":0,"github_app_private_key":"","github_token":"' + TOKEN + '",'
    '"ephemeral_runner_set_namespace":"arc-runners","ephemeral_runner_set_name":"arc-runners",'
    '"max_runners":10,"min_runners":1,"runner_scale_set_id":7,"runner_scale_set_name":"arc-runners",'
    '"server_root_ca":"","log_level":"debug","log_format":"text","metrics_addr":":8080",'
    '"metrics_endpoint":"/metrics","metrics":null}'
)


def valid(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = orjson.loads(ARC_WRITTEN_PAT_CONFIG)
    document.update(overrides)
    return document


def problems_of(document: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(document)
    return caught.value.problems


def test_a_config_written_by_arcs_controller_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(ARC_WRITTEN_PAT_CONFIG)
    config = load_config(path)
    assert config.configure_url == "https://github.com/my-org"
    assert config.ephemeral_runner_set_namespace == "arc-runners"
    assert config.ephemeral_runner_set_name == "arc-runners"
    assert (config.min_runners, config.max_runners) == (1, 10)
    assert config.runner_scale_set_id == 7
    assert config.runner_scale_set_name == "arc-runners"
    assert config.credential_data() == {"github_token": TOKEN}
    assert (config.log_level, config.log_format) == ("debug", "text")
    assert (config.metrics_addr, config.metrics_endpoint) == (":8080", "/metrics")
    assert config.metrics is None


def test_an_arc_written_github_app_config_loads_with_the_app_id_as_a_string() -> None:
    config = config_from_mapping(
        valid(
            github_token="",
            github_app_id="Iv1.abc123",
            github_app_installation_id=4242,
            github_app_private_key=PRIVATE_KEY,
        )
    )
    assert config.uses_github_app
    assert config.credential_data() == {
        "github_app_id": "Iv1.abc123",
        "github_app_installation_id": "4242",
        "github_app_private_key": PRIVATE_KEY,
    }


def test_an_older_arc_config_with_a_numeric_app_id_loads() -> None:
    config = config_from_mapping(
        valid(github_token="", github_app_id=12345, github_app_installation_id=99, github_app_private_key=PRIVATE_KEY)
    )
    assert config.github_app_id == "12345"


def test_a_missing_max_runners_means_max_int32() -> None:
    document = valid()
    del document["max_runners"]
    assert config_from_mapping(document).max_runners == MAX_INT32


def test_metrics_customisation_is_read_with_labels_and_buckets() -> None:
    config = config_from_mapping(
        valid(
            metrics={
                "counters": {"gha_started_jobs_total": {"labels": ["repository"]}},
                "gauges": {"gha_desired_runners": {"labels": ["name", "namespace"]}},
                "histograms": {"gha_job_startup_duration_seconds": {"labels": ["repository"], "buckets": [1, 5.5]}},
            }
        )
    )
    assert config.metrics is not None
    assert config.metrics.counters["gha_started_jobs_total"].labels == ("repository",)
    assert config.metrics.gauges["gha_desired_runners"].labels == ("name", "namespace")
    histogram = config.metrics.histograms["gha_job_startup_duration_seconds"]
    assert histogram.buckets == (1.0, 5.5)


def test_every_problem_is_reported_at_once() -> None:
    problems = problems_of(
        valid(
            configure_url="",
            ephemeral_runner_set_namespace="",
            ephemeral_runner_set_name="",
            runner_scale_set_id=0,
            min_runners=5,
            max_runners=2,
        )
    )
    assert len(problems) == 5
    assert any("configure_url is required" in p for p in problems)
    assert any("ephemeral_runner_set_namespace is required" in p for p in problems)
    assert any("ephemeral_runner_set_name is required" in p for p in problems)
    assert any("runner_scale_set_id" in p for p in problems)
    assert any("max_runners (2) must be greater than or equal to min_runners (5)" in p for p in problems)


def test_both_a_token_and_app_credentials_are_refused() -> None:
    problems = problems_of(valid(github_app_id="1", github_app_installation_id=2, github_app_private_key=PRIVATE_KEY))
    assert problems == [
        "both PAT and GitHub App credentials provided: set either github_token or the three github_app_* fields, "
        "not both"
    ]


def test_no_credentials_are_refused() -> None:
    (problem,) = problems_of(valid(github_token=""))
    assert problem.startswith("no credentials provided")


def test_incomplete_app_credentials_name_what_is_missing() -> None:
    (problem,) = problems_of(valid(github_token="", github_app_id="1", github_app_installation_id=0))
    assert problem == (
        "incomplete GitHub App credentials: github_app_installation_id, github_app_private_key missing or empty"
    )


def test_azure_key_vault_is_refused_as_unsupported_with_what_to_do_instead() -> None:
    (problem,) = problems_of(valid(github_token="", vault_type="azure_key_vault", vault_lookup_key="gh-secret"))
    assert "not supported" in problem
    assert "Azure Key Vault" in problem


def test_an_unknown_vault_type_is_refused() -> None:
    problems = problems_of(valid(github_token="", vault_type="hashicorp", vault_lookup_key="x"))
    assert problems == ["vault_type must be empty or 'azure_key_vault', got 'hashicorp'"]


def test_a_vault_without_lookup_key_is_refused() -> None:
    problems = problems_of(valid(github_token="", vault_type="azure_key_vault"))
    assert "vault_lookup_key is required when vault_type is set" in problems


def test_wrong_types_are_named_without_quoting_the_value() -> None:
    problems = problems_of(valid(max_runners="ten", github_token=12345, metrics=[1]))
    assert "max_runners must be an integer, got a string" in problems
    assert "github_token must be a string, got a number" in problems
    assert "metrics must be an object with counters, gauges and histograms, got an array" in problems
    assert all("ten" not in p for p in problems)


def test_bad_log_settings_are_refused() -> None:
    problems = problems_of(valid(log_level="verbose", log_format="xml"))
    assert problems == [
        "log_level must be one of debug, info, warn, error, got 'verbose'",
        "log_format must be one of text, json, got 'xml'",
    ]


def test_empty_log_settings_take_arcs_defaults() -> None:
    config = config_from_mapping(valid(log_level="", log_format=""))
    assert (config.log_level, config.log_format) == ("debug", "text")


def test_max_runners_above_int32_is_refused() -> None:
    problems = problems_of(valid(max_runners=MAX_INT32 + 1))
    assert problems == [f"max_runners must be between 0 and {MAX_INT32}, got {MAX_INT32 + 1}"]


def test_non_increasing_histogram_buckets_are_refused() -> None:
    problems = problems_of(
        valid(metrics={"histograms": {"gha_job_startup_duration_seconds": {"labels": [], "buckets": [5, 1]}}})
    )
    assert problems == ["metrics.histograms.gha_job_startup_duration_seconds.buckets must be strictly increasing"]


def test_invalid_json_is_reported_without_its_content() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config('{"github_token": "' + TOKEN + '",', source="/etc/gha-listener/config.json")
    assert TOKEN not in str(caught.value)
    assert "not valid JSON" in str(caught.value)
    assert "/etc/gha-listener/config.json" in str(caught.value)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config(tmp_path / "absent.json")


def test_the_path_comes_from_listener_config_path() -> None:
    assert config_path_from_environment({"LISTENER_CONFIG_PATH": "/etc/gha-listener/config.json"}) == Path(
        "/etc/gha-listener/config.json"
    )


def test_an_unset_listener_config_path_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="LISTENER_CONFIG_PATH is not set"):
        config_path_from_environment({})


def test_secrets_never_appear_in_the_repr() -> None:
    pat = config_from_mapping(valid())
    app = config_from_mapping(
        valid(github_token="", github_app_id="1", github_app_installation_id=2, github_app_private_key=PRIVATE_KEY)
    )
    assert TOKEN not in repr(pat)
    assert "MIIsecret" not in repr(app)
    assert pat.secrets() == [TOKEN]
    assert app.secrets() == [PRIVATE_KEY]


def test_a_token_discards_empty_app_fields() -> None:
    config: ListenerConfig = config_from_mapping(valid())
    assert not config.uses_github_app
    assert config.github_app_installation_id == 0
