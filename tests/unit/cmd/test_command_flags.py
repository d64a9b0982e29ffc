"""``arc-scaleset controller``: ARC's flags and environment, parsed as ARC's manager parses them."""

from __future__ import annotations

import argparse
import logging

import pytest

from arc_scaleset.cli import build_parser
from arc_scaleset.clock import FakeClock
from arc_scaleset.cmd import controller as command
from arc_scaleset.cmd.controller import (
    cache_namespaces,
    ignored_flag_warnings,
    rate_limiter_factory,
    settings_from_args,
)
from arc_scaleset.cmd.goflags import LEGACY_FLAGS, parse_go_duration
from arc_scaleset.controllers.settings import SettingsError
from arc_scaleset.kube.workqueue import BucketRateLimiter, ItemExponentialRateLimiter, MaxOfRateLimiter

ENV = {"CONTROLLER_MANAGER_POD_NAMESPACE": "arc-systems", "CONTROLLER_MANAGER_CONTAINER_IMAGE": "ghcr.io/x/c:1"}

# The args of ARC's gha-runner-scale-set-controller chart (0.14) with metrics and two replicas.
ARC_CHART_ARGS = [
    "--auto-scaling-runner-set-only",
    "--enable-leader-election",
    "--leader-election-id=arc-gha-rs-controller",
    "--log-level=debug",
    "--log-format=text",
    "--runner-max-concurrent-reconciles=2",
    "--update-strategy=immediate",
    "--metrics-addr=:8080",
    "--listener-metrics-addr=:8080",
    "--listener-metrics-endpoint=/metrics",
]


def parse(*argv: str) -> argparse.Namespace:
    args_list = ["controller", *argv]
    return build_parser(args_list).parse_args(args_list)


def controller_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arc-scaleset controller")
    command.configure(parser)
    return parser


def test_arcs_chart_args_parse_into_the_settings_arc_would_use() -> None:
    args = parse(*ARC_CHART_ARGS)
    settings = settings_from_args(args, ENV)
    assert args.enable_leader_election is True
    assert args.leader_election_id == "arc-gha-rs-controller"
    assert args.metrics_addr == ":8080"
    assert settings.controller_namespace == "arc-systems"
    assert settings.controller_image == "ghcr.io/x/c:1"
    assert (settings.log_level, settings.log_format) == ("debug", "text")
    assert settings.runner_max_concurrent_reconciles == 2
    assert (settings.listener_metrics_addr, settings.listener_metrics_endpoint) == (":8080", "/metrics")
    assert settings.listener_metrics_port == 8080
    assert settings.metrics_enabled is True
    assert cache_namespaces(args, settings.controller_namespace) is None


def test_arcs_chart_args_warn_only_about_the_removed_update_strategy() -> None:
    warnings = ignored_flag_warnings(parse(*ARC_CHART_ARGS))
    assert len(warnings) == 1
    assert warnings[0].startswith("--update-strategy is ignored")


def test_the_chart_without_metrics_turns_every_metric_off() -> None:
    args = parse("--listener-metrics-addr=0", "--listener-metrics-endpoint=", "--metrics-addr=0")
    settings = settings_from_args(args, ENV)
    assert settings.metrics_enabled is False
    assert settings.listener_metrics_port is None
    assert settings.listener_metrics_endpoint == ""


def test_defaults_are_arcs() -> None:
    args = parse()
    settings = settings_from_args(args, ENV)
    assert args.enable_leader_election is False
    assert args.leader_election_id == "actions-runner-controller"
    assert args.metrics_addr == args.listener_metrics_addr == ":8080"
    assert args.health_probe_bind_address == ""
    assert args.workqueue_rate_limiter == ""
    assert (args.k8s_client_rate_limiter_qps, args.k8s_client_rate_limiter_burst) == (20.0, 30)
    assert args.kubeconfig is None
    assert settings.runner_max_concurrent_reconciles == 2
    assert (settings.log_level, settings.log_format) == ("debug", "text")
    assert settings.exclude_label_prefixes == settings.image_pull_secrets == ()
    assert ignored_flag_warnings(args) == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], False), (["--accept-any-version-label"], True), (["--accept-any-version-label=false"], False)],
)
def test_accept_any_version_label_turns_the_version_gate_off_only_when_given(argv: list[str], expected: bool) -> None:
    assert settings_from_args(parse(*argv), ENV).accept_any_version_label is expected


@pytest.mark.parametrize(("argv", "expected"), [([], 10_000), (["--max-runners-ceiling=250"], 250)])
def test_the_max_runners_ceiling_defaults_to_ten_thousand_and_can_be_set(argv: list[str], expected: int) -> None:
    assert settings_from_args(parse(*argv), ENV).max_runners_ceiling == expected


@pytest.mark.parametrize(
    ("argv", "expected"), [([], True), (["--runner-cost-labels=false"], False), (["--runner-cost-labels"], True)]
)
def test_cost_labels_are_on_unless_turned_off(argv: list[str], expected: bool) -> None:
    assert settings_from_args(parse(*argv), ENV).runner_cost_labels is expected


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        ([], {}, None),
        (["--otlp-endpoint=http://collector:4318"], {}, "http://collector:4318/v1/traces"),
        ([], {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces"),
        ([], {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/traces"}, "http://collector:4318/traces"),
    ],
)
def test_traces_are_off_unless_the_flag_or_the_standard_variables_name_an_endpoint(
    argv: list[str], environ: dict[str, str], expected: str | None
) -> None:
    assert settings_from_args(parse(*argv), {**ENV, **environ}).otlp_traces_endpoint == expected


def test_a_max_runners_ceiling_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--max-runners-ceiling=0")
    assert "--max-runners-ceiling" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "expected"), [([], 256 * 1024), (["--max-runner-template-bytes=65536"], 65536)])
def test_the_runner_template_bound_defaults_to_256_kib_and_can_be_set(argv: list[str], expected: int) -> None:
    assert settings_from_args(parse(*argv), ENV).max_runner_template_bytes == expected


def test_repeatable_flags_collect_every_value_in_order() -> None:
    args = parse(
        "--exclude-label-propagation-prefix=argocd.argoproj.io/",
        "--exclude-label-propagation-prefix",
        "helm.sh/",
        "--auto-scaler-image-pull-secrets=regcred",
        "--auto-scaler-image-pull-secrets=mirror",
    )
    settings = settings_from_args(args, ENV)
    assert settings.exclude_label_prefixes == ("argocd.argoproj.io/", "helm.sh/")
    assert settings.image_pull_secrets == ("regcred", "mirror")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--enable-leader-election"], True),
        (["--enable-leader-election=true"], True),
        (["--enable-leader-election=1"], True),
        (["--enable-leader-election=false"], False),
        (["--enable-leader-election=F"], False),
        (["-enable-leader-election"], True),
        ([], False),
    ],
)
def test_boolean_flags_take_gos_spellings(argv: list[str], expected: bool) -> None:
    assert parse(*argv).enable_leader_election is expected


def test_a_single_dash_works_as_with_gos_flag_package() -> None:
    args = parse("-log-level=info", "-leader-election-id", "x", "-exclude-label-propagation-prefix=a/")
    assert (args.log_level, args.leader_election_id, args.exclude_label_propagation_prefix) == ("info", "x", ["a/"])


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--workqueue-rate-limiter=leaky_bucket"], "bucket_rate_limiter, typed_rate_limiter"),
        (["--log-level=verbose"], "debug, info, warn, error"),
        (["--log-format=yaml"], "text, json"),
        (["--runner-max-concurrent-reconciles=0"], "at least 1"),
        (["--runner-max-concurrent-reconciles=two"], "not an integer"),
        (["--scale-set-max-concurrent-reconciles=0"], "at least 1"),
        (["--log-level=200"], "or a number from -128 to 127"),
        (["--k8s-client-rate-limiter-qps=fast"], "not a number"),
        (["--k8s-client-rate-limiter-burst=3.5"], "not an integer"),
        (["--metrics", ":9090"], "unrecognized arguments"),  # an abbreviation, refused as Go's flag package does
        (["--sync-period=soon"], "not a duration"),
        (["--enable-leader-election=yes"], "not a boolean"),
        (["--no-such-flag"], "unrecognized arguments"),
    ],
)
def test_a_bad_value_exits_2_with_a_message_naming_the_flag_and_what_it_accepts(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(*argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert fragment in error
    flag = argv[0].split("=")[0]
    assert flag in error


@pytest.mark.parametrize("name", ["bucket_rate_limiter", ""])
def test_the_bucket_rate_limiter_adds_a_global_bucket_to_per_key_backoff(name: str) -> None:
    limiter = rate_limiter_factory(name, clock=FakeClock())()
    assert isinstance(limiter, MaxOfRateLimiter)
    assert {type(part) for part in limiter.limiters} == {ItemExponentialRateLimiter, BucketRateLimiter}


def test_the_typed_rate_limiter_is_per_key_backoff_only() -> None:
    assert isinstance(rate_limiter_factory("typed_rate_limiter", clock=FakeClock())(), ItemExponentialRateLimiter)


def test_each_controller_gets_its_own_rate_limiter() -> None:
    factory = rate_limiter_factory("bucket_rate_limiter", clock=FakeClock())
    assert factory() is not factory()


def test_an_unknown_rate_limiter_name_is_refused() -> None:
    with pytest.raises(ValueError, match="typed_rate_limiter"):
        rate_limiter_factory("fast", clock=FakeClock())


@pytest.mark.parametrize("missing", ["CONTROLLER_MANAGER_POD_NAMESPACE", "CONTROLLER_MANAGER_CONTAINER_IMAGE"])
def test_a_missing_required_environment_variable_is_named(missing: str) -> None:
    environ = {key: value for key, value in ENV.items() if key != missing}
    with pytest.raises(SettingsError, match=missing):
        settings_from_args(parse(), environ)


def test_run_exits_1_and_logs_the_missing_variable_before_touching_any_cluster(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("CONTROLLER_MANAGER_POD_NAMESPACE", raising=False)
    monkeypatch.setenv("CONTROLLER_MANAGER_CONTAINER_IMAGE", "img")
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.setattr(command, "configure_logging", lambda **_: None)  # keep caplog's handler
    with caplog.at_level(logging.ERROR):
        assert command.run(parse()) == 1
    assert "CONTROLLER_MANAGER_POD_NAMESPACE" in caplog.text


def test_run_exits_1_when_there_are_no_kubernetes_credentials(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(command, "configure_logging", lambda **_: None)
    with caplog.at_level(logging.ERROR):
        assert command.run(parse("--kubeconfig=/nonexistent/kubeconfig")) == 1
    assert "no usable Kubernetes credentials" in caplog.text


@pytest.mark.parametrize(("argv", "warned"), [((), True), (("--vault-allow-list=arc-vault-allow-list",), False)])
def test_without_a_vault_allow_list_the_controller_warns_at_start_that_vault_use_is_unrestricted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, argv: tuple[str, ...], warned: bool
) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(command, "configure_logging", lambda **_: None)
    with caplog.at_level(logging.WARNING):
        assert command.run(parse("--kubeconfig=/nonexistent/kubeconfig", *argv)) == 1
    assert ("vault use is unrestricted" in caplog.text) is warned


def test_the_vault_allow_list_names_a_configmap_and_defaults_to_none() -> None:
    assert settings_from_args(parse(), ENV).vault_allow_list == ""
    assert settings_from_args(parse("--vault-allow-list", " allow "), ENV).vault_allow_list == "allow"


def test_the_listener_entrypoint_and_ghes_variables_are_read_from_the_environment() -> None:
    settings = settings_from_args(parse(), {**ENV, "LISTENER_ENTRYPOINT": "/ghalistener"})
    assert settings.listener_entrypoint == ("/ghalistener",)


def test_every_legacy_flag_is_accepted_and_warned_about_once() -> None:
    argv: list[str] = []
    for flag in LEGACY_FLAGS:
        argv.append(f"--{flag.name}" if flag.kind == "bool" else f"--{flag.name}=x")
    warnings = ignored_flag_warnings(parse(*argv))
    assert len(warnings) == len(LEGACY_FLAGS)
    for flag in LEGACY_FLAGS:
        assert sum(line.startswith(f"--{flag.name} is ignored") for line in warnings) == 1


def test_a_repeated_legacy_flag_still_warns_once() -> None:
    warnings = ignored_flag_warnings(parse("--runner-image-pull-secret=a", "--runner-image-pull-secret=b"))
    assert warnings == [line for line in warnings if line.startswith("--runner-image-pull-secret")]
    assert len(warnings) == 1


def test_flags_that_are_accepted_but_not_served_say_so() -> None:
    warnings = ignored_flag_warnings(
        parse("--pprof-addr=:6060", "--port=9443", "--sync-period=1m30s", "--auto-scaling-runner-set-only=false")
    )
    assert [line.split(" ")[0].split("=")[0] for line in warnings] == [
        "--auto-scaling-runner-set-only",
        "--pprof-addr",
        "--port",
        "--sync-period",
    ]


def test_legacy_flag_values_never_reach_the_warnings() -> None:
    secret = "ghp_should_never_be_logged_0123456789"
    warnings = ignored_flag_warnings(parse(f"--github-token={secret}", "--github-basicauth-password", secret))
    assert len(warnings) == 2
    assert all(secret not in line for line in warnings)


def test_watch_namespaces_always_include_the_controller_namespace() -> None:
    assert cache_namespaces(parse("--watch-single-namespace=team-a"), "arc-systems") == frozenset(
        {"team-a", "arc-systems"}
    )
    assert cache_namespaces(parse("--watch-namespace=team-b"), "arc-systems") == frozenset({"team-b", "arc-systems"})
    both = parse("--watch-namespace=team-b", "--watch-single-namespace=team-a")
    assert cache_namespaces(both, "arc-systems") == frozenset({"team-a", "team-b", "arc-systems"})
    assert settings_from_args(both, ENV).watch_namespace == "team-a"


def test_every_flag_states_its_default_in_its_help() -> None:
    parser = controller_parser()
    missing = [
        action.option_strings[0]
        for action in parser._actions
        if action.help not in (None, argparse.SUPPRESS) and action.dest != "help" and "default" not in action.help
    ]
    assert missing == []


def test_the_help_says_pprof_is_not_served() -> None:
    text = controller_parser().format_help()
    assert "NOT served" in " ".join(text.split())


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1m", 60.0), ("90s", 90.0), ("1h30m", 5400.0), ("500ms", 0.5), ("1.5s", 1.5), ("0", 0.0), ("2m0s", 120.0)],
)
def test_go_durations_are_read_as_seconds(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "1", "m", "1x", "1m 2s", "five minutes"])
def test_things_that_are_not_go_durations_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("value", "level"), [("-3", "debug"), ("-1", "debug"), ("0", "info"), ("1", "warn"), ("2", "error"), ("5", "error")]
)
def test_arcs_numeric_log_levels_are_taken_as_zap_reads_them(value: str, level: str) -> None:
    assert parse(f"--log-level={value}").log_level == level


@pytest.mark.parametrize(
    ("qps", "burst", "limit"),
    [(20.0, 30, (20.0, 30)), (0.0, 0, (5.0, 10)), (50.0, 0, (50.0, 10)), (-1.0, 30, (None, 30))],
)
def test_the_client_rate_limit_flags_mean_what_they_mean_to_client_go(
    qps: float, burst: int, limit: tuple[float | None, int]
) -> None:
    """0 is client-go's default (5 per second, burst 10) and a negative QPS no limit, as for ARC."""
    assert command.client_rate_limit(qps, burst) == limit


def test_the_per_set_controllers_workers_default_to_four_and_follow_the_flag() -> None:
    assert settings_from_args(parse(), ENV).scale_set_max_concurrent_reconciles == 4
    args = parse("--scale-set-max-concurrent-reconciles=1")
    assert settings_from_args(args, ENV).scale_set_max_concurrent_reconciles == 1
