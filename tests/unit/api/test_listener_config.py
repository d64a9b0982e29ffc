"""The listener's config.json model: ARC's format both ways, one set of rules, every problem at once."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from arc_scaleset.api.autoscalingrunnerset import MAX_RUNNERS_UNBOUNDED
from arc_scaleset.api.credentials import AppConfig
from arc_scaleset.api.listener_config import ListenerConfig, ListenerConfigError
from arc_scaleset.api.listener_metrics import GaugeSpec, HistogramSpec, ListenerMetricsConfig
from tests.unit.api.listener_config_fixtures import ARC_WRITTEN_PAT_CONFIG, PRIVATE_KEY, TOKEN


def valid(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = orjson.loads(ARC_WRITTEN_PAT_CONFIG)
    document.update(overrides)
    return document


def problems_of(document: dict[str, Any]) -> list[str]:
    with pytest.raises(ListenerConfigError) as caught:
        ListenerConfig.from_document(document)
    return caught.value.problems


# --- ARC's format, both ways ------------------------------------------------------------------------------


def test_a_config_written_by_arcs_controller_loads() -> None:
    config = ListenerConfig.from_json(ARC_WRITTEN_PAT_CONFIG)
    assert config.configure_url == "https://github.com/my-org"
    assert config.ephemeral_runner_set_namespace == "arc-runners"
    assert config.ephemeral_runner_set_name == "arc-runners"
    assert (config.min_runners, config.max_runners) == (1, 10)
    assert config.runner_scale_set_id == 7
    assert config.runner_scale_set_name == "arc-runners"
    assert config.app_config() == AppConfig(github_token=TOKEN)
    assert (config.log_level, config.log_format) == ("debug", "text")
    assert (config.metrics_addr, config.metrics_endpoint) == (":8080", "/metrics")
    assert config.metrics is None


def test_a_config_arcs_controller_wrote_is_written_back_byte_for_byte() -> None:
    assert ListenerConfig.from_json(ARC_WRITTEN_PAT_CONFIG).to_json().decode() == ARC_WRITTEN_PAT_CONFIG


def test_what_is_written_reads_back_identically() -> None:
    config = ListenerConfig(
        configure_url="https://ghe.example.com/enterprises/e",
        github_app_id="Iv1.abc123",
        github_app_installation_id=4242,
        github_app_private_key=PRIVATE_KEY,
        ephemeral_runner_set_namespace="team",
        ephemeral_runner_set_name="arc-runners",
        max_runners=30,
        min_runners=2,
        runner_scale_set_id=9,
        runner_scale_set_name="arc",
        server_root_ca="-----BEGIN CERTIFICATE-----\n",
        log_level="info",
        log_format="json",
        metrics_addr=":8080",
        metrics_endpoint="/metrics",
        metrics=ListenerMetricsConfig(
            gauges={"gha_desired_runners": GaugeSpec(labels=("name",))},
            histograms={"gha_job_startup_duration_seconds": HistogramSpec(labels=(), buckets=(1.0, 5.5))},
        ),
    )
    assert ListenerConfig.from_json(config.to_json()) == config


def test_an_arc_written_github_app_config_loads_with_the_app_id_as_a_string() -> None:
    config = ListenerConfig.from_document(
        valid(
            github_token="",
            github_app_id="Iv1.abc123",
            github_app_installation_id=4242,
            github_app_private_key=PRIVATE_KEY,
        )
    )
    assert config.uses_github_app
    assert config.app_config() == AppConfig(
        github_app_id="Iv1.abc123", github_app_installation_id=4242, github_app_private_key=PRIVATE_KEY
    )


def test_an_older_arc_config_with_a_numeric_app_id_and_a_string_installation_id_loads() -> None:
    config = ListenerConfig.from_document(
        valid(github_token="", github_app_id=12345, github_app_installation_id="99", github_app_private_key=PRIVATE_KEY)
    )
    assert (config.github_app_id, config.github_app_installation_id) == ("12345", 99)


def test_null_and_missing_keys_read_as_go_zero_values() -> None:
    document = valid(runner_scale_set_name=None, metrics_addr=None)
    del document["max_runners"]
    config = ListenerConfig.from_document(document)
    assert config.max_runners == MAX_RUNNERS_UNBOUNDED
    assert (config.runner_scale_set_name, config.metrics_addr) == ("", "")


def test_unknown_keys_are_ignored() -> None:
    config = ListenerConfig.from_document(valid(azure_key_vault=None, something_new={"a": 1}))
    assert "something_new" not in config.to_document()


def test_metrics_customisation_is_read_with_labels_and_buckets() -> None:
    config = ListenerConfig.from_document(
        valid(
            metrics={
                "counters": {"gha_started_jobs_total": {"labels": ["repository"]}},
                "gauges": {"gha_desired_runners": {"labels": ["name", "namespace"]}, "gha_idle_runners": None},
                "histograms": {"gha_job_startup_duration_seconds": {"labels": ["repository"], "buckets": [1, 5.5]}},
            }
        )
    )
    assert config.metrics is not None
    assert config.metrics.counters is not None
    assert config.metrics.gauges is not None
    assert config.metrics.counters["gha_started_jobs_total"].labels == ("repository",)
    assert config.metrics.gauges["gha_desired_runners"].labels == ("name", "namespace")
    assert config.metrics.gauges["gha_idle_runners"].labels == ()
    assert config.metrics.histograms is not None
    assert config.metrics.histograms["gha_job_startup_duration_seconds"].buckets == (1.0, 5.5)


def test_null_metric_labels_and_buckets_read_as_go_zero_values_and_unknown_sections_are_ignored() -> None:
    config = ListenerConfig.from_document(
        valid(
            metrics={
                "counters": None,
                "gauges": {"gha_desired_runners": {"labels": None}},
                "histograms": {"gha_job_startup_duration_seconds": {"labels": ["repository"], "buckets": None}},
                "summaries": {"anything": 1},
            }
        )
    )
    assert config.metrics == ListenerMetricsConfig(
        gauges={"gha_desired_runners": GaugeSpec(labels=())},
        histograms={"gha_job_startup_duration_seconds": HistogramSpec(labels=("repository",), buckets=None)},
    )


def test_a_metrics_section_arcs_controller_wrote_is_written_back_byte_for_byte() -> None:
    # Go writes a float64 bucket bound without a fraction as an integer, and omits absent kinds and buckets.
    section = (
        '{"counters":{"gha_started_jobs_total":{"labels":["repository"]}},'
        '"histograms":{"gha_job_startup_duration_seconds":{"labels":[],"buckets":[1,5.5,30]},'
        '"gha_job_execution_duration_seconds":{"labels":["job_result"]}}}'
    )
    arc_written = ARC_WRITTEN_PAT_CONFIG.replace('"metrics":null', f'"metrics":{section}')
    assert ListenerConfig.from_json(arc_written).to_json().decode() == arc_written


def test_empty_log_settings_take_arcs_defaults() -> None:
    config = ListenerConfig.from_document(valid(log_level="", log_format=""))
    assert (config.log_level, config.log_format) == ("debug", "text")


# --- every problem at once, by key -----------------------------------------------------------------------


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


def test_the_controllers_constructor_call_gets_the_same_rules_and_messages() -> None:
    with pytest.raises(ListenerConfigError) as caught:
        ListenerConfig(configure_url="https://github.com/org", github_token=TOKEN, ephemeral_runner_set_namespace="ns",
                       ephemeral_runner_set_name="set", runner_scale_set_id=0)  # fmt: skip
    assert caught.value.problems == ["runner_scale_set_id is required and must not be 0"]


def test_the_controllers_constructor_call_decodes_its_values_as_the_file_is_read() -> None:
    with pytest.raises(ListenerConfigError) as caught:
        ListenerConfig(**valid(max_runners="ten", github_token=None, github_app_id=12345))
    assert caught.value.problems == [
        "max_runners must be an integer, got a string",
        "no credentials provided: either a PAT or GitHub App credentials should be provided (the GitHub App "
        "credentials lack github_app_installation_id, github_app_private_key)",
    ]
    config = ListenerConfig(**valid(github_token="", github_app_id=12345, github_app_installation_id="99",
                                    github_app_private_key=PRIVATE_KEY, max_runners=30.0, log_level=""))  # fmt: skip
    assert (config.github_app_id, config.github_app_installation_id) == ("12345", 99)
    assert (config.max_runners, config.log_level) == (30, "debug")


def test_wrong_types_are_named_without_quoting_the_value() -> None:
    problems = problems_of(valid(max_runners="ten", github_token=12345, metrics=[1]))
    assert problems == [
        "github_token must be a string, got a number",
        "max_runners must be an integer, got a string",
        "metrics must be an object with counters, gauges and histograms, got an array",
    ]
    assert all("ten" not in p and "12345" not in p for p in problems)


def test_a_mistyped_key_is_reported_once_and_the_rest_is_still_judged() -> None:
    problems = problems_of(valid(configure_url=3, runner_scale_set_id=True, ephemeral_runner_set_name=""))
    assert problems == [
        "configure_url must be a string, got a number",
        "runner_scale_set_id must be an integer, got a boolean",
        "ephemeral_runner_set_name is required",
    ]


def test_problems_inside_the_metrics_section_are_named_by_path_and_all_reported() -> None:
    problems = problems_of(
        valid(
            metrics={
                "counters": [1],
                "gauges": {"gha_desired_runners": {"labels": [1]}},
                "histograms": {
                    "gha_job_startup_duration_seconds": {"labels": [], "buckets": ["1.5"]},
                    "gha_job_execution_duration_seconds": {"labels": [], "buckets": [5, 1]},
                },
            }
        )
    )
    assert problems == [
        "metrics.counters must be an object, got an array",
        "metrics.gauges.gha_desired_runners.labels.0 must be a string, got a number",
        "metrics.histograms.gha_job_startup_duration_seconds.buckets.0 must be a number, got a string",
        "metrics.histograms.gha_job_execution_duration_seconds.buckets must be strictly increasing",
    ]


def test_a_null_label_or_bucket_is_refused_rather_than_read_as_empty() -> None:
    problems = problems_of(
        valid(
            metrics={
                "gauges": {"gha_desired_runners": {"labels": ["name", None]}},
                "histograms": {"gha_job_startup_duration_seconds": {"labels": [], "buckets": [1, None, True]}},
            }
        )
    )
    assert problems == [
        "metrics.gauges.gha_desired_runners.labels.1 must be a string, got null",
        "metrics.histograms.gha_job_startup_duration_seconds.buckets.1 must be a number, got null",
        "metrics.histograms.gha_job_startup_duration_seconds.buckets.2 must be a number, got a boolean",
    ]


def test_non_increasing_histogram_buckets_are_refused() -> None:
    problems = problems_of(
        valid(metrics={"histograms": {"gha_job_startup_duration_seconds": {"labels": [], "buckets": [5, 1]}}})
    )
    assert problems == ["metrics.histograms.gha_job_startup_duration_seconds.buckets must be strictly increasing"]


def test_bad_log_settings_are_refused() -> None:
    problems = problems_of(valid(log_level="verbose", log_format="xml"))
    assert problems == [
        "log_level must be one of debug, info, warn, error, got 'verbose'",
        "log_format must be one of text, json, got 'xml'",
    ]


def test_max_runners_above_int32_is_refused() -> None:
    problems = problems_of(valid(max_runners=MAX_RUNNERS_UNBOUNDED + 1))
    assert problems == [f"max_runners must be between 0 and {MAX_RUNNERS_UNBOUNDED}, got {MAX_RUNNERS_UNBOUNDED + 1}"]


def test_a_document_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ListenerConfigError, match="must be a JSON object"):
        ListenerConfig.from_json("[1, 2]")


def test_invalid_json_is_reported_without_its_content() -> None:
    with pytest.raises(ListenerConfigError) as caught:
        ListenerConfig.from_json('{"github_token": "' + TOKEN + '",', source="/etc/gha-listener/config.json")
    assert TOKEN not in str(caught.value)
    assert "not valid JSON" in str(caught.value)
    assert "/etc/gha-listener/config.json" in str(caught.value)


# --- credentials ------------------------------------------------------------------------------------------


# The rule's table of combinations and messages: tests/unit/api/test_api_credentials.py.


def test_both_a_token_and_a_complete_app_are_refused_with_arcs_message() -> None:
    problems = problems_of(valid(github_app_id="1", github_app_installation_id=2, github_app_private_key=PRIVATE_KEY))
    assert problems == [
        "both PAT and GitHub App credentials provided. should only provide one (remove github_token or the "
        "github_app_id, github_app_installation_id, github_app_private_key keys)"
    ]


def test_no_credentials_are_refused_with_arcs_message() -> None:
    (problem,) = problems_of(valid(github_token=""))
    assert problem.startswith("no credentials provided: either a PAT or GitHub App credentials should be provided")


def test_incomplete_app_credentials_are_refused_naming_what_is_missing() -> None:
    (problem,) = problems_of(valid(github_token="", github_app_id="1", github_app_installation_id=0))
    assert problem == (
        "no credentials provided: either a PAT or GitHub App credentials should be provided (the GitHub App "
        "credentials lack github_app_installation_id, github_app_private_key)"
    )


def test_a_token_with_part_of_an_app_uses_the_token_as_arcs_listener_does() -> None:
    config = ListenerConfig.from_document(valid(github_app_id="1", github_app_private_key=PRIVATE_KEY))
    assert not config.uses_github_app
    assert config.app_config() == AppConfig(github_token=TOKEN)


AZURE_KEY_VAULT_CONFIG = {
    "tenant_id": "tenant",
    "client_id": "client",
    "url": "https://my-vault.vault.azure.net/",
    "certificate_path": "/etc/arc/vault.pem",
}


def test_a_vault_config_as_arcs_controller_writes_it_loads_without_credentials_in_the_file() -> None:
    document = valid(
        github_token="",
        vault_type="azure_key_vault",
        vault_lookup_key="gh-secret",
        azure_key_vault=AZURE_KEY_VAULT_CONFIG,
    )
    config = ListenerConfig.from_document(document)
    assert config.azure_key_vault is not None
    assert config.azure_key_vault.url == "https://my-vault.vault.azure.net/"
    assert config.secrets() == []
    # What the listener read from the vault takes the place of the (absent) credentials.
    with_token = config.with_credentials(AppConfig(github_token=TOKEN))
    assert with_token.app_config() == AppConfig(github_token=TOKEN)
    assert with_token.secrets() == [TOKEN]


def test_a_vault_config_is_written_with_azure_key_vault_after_the_lookup_key_and_read_back_alike() -> None:
    document = valid(
        github_token="",
        vault_type="azure_key_vault",
        vault_lookup_key="gh-secret",
        azure_key_vault=AZURE_KEY_VAULT_CONFIG,
    )
    written = ListenerConfig.from_document(document).to_document()
    assert list(written)[:4] == ["configure_url", "vault_type", "vault_lookup_key", "azure_key_vault"]
    assert written["azure_key_vault"] == AZURE_KEY_VAULT_CONFIG
    assert ListenerConfig.from_json(orjson.dumps(written)).to_document() == written


def test_a_config_without_a_vault_has_no_azure_key_vault_key_as_arc_omits_it() -> None:
    assert "azure_key_vault" not in ListenerConfig.from_document(valid()).to_document()


def test_azure_key_vault_without_its_settings_is_refused_naming_what_is_missing() -> None:
    (problem,) = problems_of(valid(github_token="", vault_type="azure_key_vault", vault_lookup_key="gh-secret"))
    assert "azure_key_vault is required" in problem
    problems = problems_of(
        valid(
            github_token="",
            vault_type="azure_key_vault",
            vault_lookup_key="gh-secret",
            azure_key_vault={**AZURE_KEY_VAULT_CONFIG, "tenant_id": "", "certificate_path": ""},
        )
    )
    assert problems == [
        "azure_key_vault.tenant_id is required",
        "azure_key_vault.certificate_path is required",
    ]


def test_a_mistyped_vault_setting_is_reported_once_by_its_path() -> None:
    problems = problems_of(
        valid(
            github_token="",
            vault_type="azure_key_vault",
            vault_lookup_key="gh-secret",
            azure_key_vault={**AZURE_KEY_VAULT_CONFIG, "tenant_id": 3},
        )
    )
    assert problems == ["azure_key_vault.tenant_id must be a string, got a number"]
    problems = problems_of(
        valid(github_token="", vault_type="azure_key_vault", vault_lookup_key="gh-secret", azure_key_vault="vault")
    )
    assert problems == ["azure_key_vault must be an object, got a string"]


def test_an_unknown_vault_type_is_refused() -> None:
    problems = problems_of(valid(github_token="", vault_type="hashicorp", vault_lookup_key="x"))
    assert problems == ["vault_type must be empty or 'azure_key_vault', got 'hashicorp'"]


def test_a_vault_without_lookup_key_is_refused() -> None:
    problems = problems_of(valid(github_token="", vault_type="azure_key_vault"))
    assert "vault_lookup_key is required when vault_type is set" in problems


def test_secrets_never_appear_in_the_repr_or_in_problems() -> None:
    pat = ListenerConfig.from_document(valid())
    app = ListenerConfig.from_document(
        valid(github_token="", github_app_id="1", github_app_installation_id=2, github_app_private_key=PRIVATE_KEY)
    )
    assert TOKEN not in repr(pat)
    assert "MIIsecret" not in repr(app)
    assert pat.secrets() == [TOKEN]
    assert app.secrets() == [PRIVATE_KEY]
    with pytest.raises(ListenerConfigError) as caught:
        ListenerConfig.from_document(valid(github_app_private_key=PRIVATE_KEY, runner_scale_set_id="x"))
    assert "MIIsecret" not in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_a_token_leaves_the_app_fields_empty() -> None:
    config = ListenerConfig.from_document(valid())
    assert not config.uses_github_app
    assert config.github_app_installation_id == 0
