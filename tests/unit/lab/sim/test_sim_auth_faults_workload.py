"""The sim's credentials checks, fault rules and workload plans, as pure logic."""

from __future__ import annotations

import jwt
import pytest

from arc_scaleset.clock import FakeClock
from arc_scaleset_lab.sim import errors
from arc_scaleset_lab.sim.auth import SCOPE_ORG, SCOPE_REPO, Credentials
from arc_scaleset_lab.sim.faults import FaultInjector, FaultRule
from arc_scaleset_lab.sim.state import SimConfig
from arc_scaleset_lab.sim.workload import WorkloadSpec, plan


def credentials(**config: float) -> tuple[Credentials, FakeClock]:
    clock = FakeClock()
    return Credentials(clock=clock, config=SimConfig(**config)), clock  # type: ignore[arg-type]


def app_jwt(private_pem: str, iss: str | int, clock: FakeClock, *, lifetime: int = 540) -> str:
    iat = int(clock.now().timestamp()) - 60
    return jwt.encode({"iat": iat, "exp": iat + lifetime, "iss": str(iss)}, private_pem, algorithm="RS256")


def test_unknown_pat_is_bad_credentials_and_a_missing_scope_is_forbidden() -> None:
    creds, _ = credentials()
    with pytest.raises(errors.GitHubError) as unknown:
        creds.issue_registration_token("ghp_nope", "org")
    assert (unknown.value.status, unknown.value.message) == (401, "Bad credentials")
    creds.add_token("ghp_repo_only", scopes=[SCOPE_REPO])
    creds.issue_registration_token("ghp_repo_only", "org/repo")
    with pytest.raises(errors.GitHubError) as forbidden:
        creds.issue_registration_token("ghp_repo_only", "org")
    assert forbidden.value.status == 403


async def test_registration_tokens_expire_on_the_sim_clock() -> None:
    creds, clock = credentials(registration_token_ttl=60)
    creds.add_token("ghp", scopes=[SCOPE_ORG])
    token, _ = creds.issue_registration_token("ghp", "Org")
    assert creds.redeem_registration_token(token) == "org"
    await clock.advance(60)
    with pytest.raises(errors.GitHubError):
        creds.redeem_registration_token(token)


async def test_app_jwts_are_verified_against_the_registered_key_and_the_sim_clock() -> None:
    creds, clock = credentials()
    app = creds.add_app(app_id=7, installation_ids=[70], client_id="Iv1.seven")
    assert app.private_key_pem is not None
    token, _ = creds.issue_installation_token(app_jwt(app.private_key_pem, 7, clock), 70)
    assert creds.bearer_scopes(token)
    creds.issue_installation_token(app_jwt(app.private_key_pem, "Iv1.seven", clock), 70)
    with pytest.raises(errors.GitHubError) as foreign:
        creds.issue_installation_token(app_jwt(app.private_key_pem, 7, clock), 71)
    assert foreign.value.status == 404
    other = creds.add_app(app_id=8, installation_ids=[80])
    assert other.private_key_pem is not None
    with pytest.raises(errors.GitHubError) as wrong_key:
        creds.issue_installation_token(app_jwt(other.private_key_pem, 7, clock), 70)
    assert wrong_key.value.status == 401
    with pytest.raises(errors.GitHubError):
        creds.issue_installation_token(app_jwt(app.private_key_pem, 7, clock, lifetime=3600), 70)
    stale = app_jwt(app.private_key_pem, 7, clock)
    await clock.advance(600)
    with pytest.raises(errors.GitHubError):
        creds.issue_installation_token(stale, 70)


async def test_admin_tokens_are_bound_to_a_tenant_expire_and_can_be_revoked() -> None:
    creds, clock = credentials(admin_token_ttl=120)
    token, _ = creds.issue_admin_token(1)
    assert jwt.decode(token, options={"verify_signature": False})["exp"] > clock.now().timestamp()
    creds.check_admin_token(token, 1)
    with pytest.raises(errors.ActionsError):
        creds.check_admin_token(token, 2)
    creds.expire_admin_tokens()
    with pytest.raises(errors.ActionsError) as revoked:
        creds.check_admin_token(token, 1)
    assert revoked.value.status == 401
    fresh, _ = creds.issue_admin_token(1)
    creds.check_admin_token(fresh, 1)
    await clock.advance(120)
    with pytest.raises(errors.ActionsError):
        creds.check_admin_token(fresh, 1)


def test_credentials_repr_holds_no_token() -> None:
    creds, _ = credentials()
    creds.add_token("ghp_secret_value")
    assert "ghp_secret_value" not in repr(creds)


def test_a_counted_fault_fires_exactly_count_times_on_matching_routes_only() -> None:
    faults = FaultInjector()
    faults.add(FaultRule(route="get_*", status=503, count=2))
    assert faults.take("create_session", "POST") is None
    assert [faults.take("get_message", "GET") is not None for _ in range(3)] == [True, True, False]
    assert faults.rules() == []


def test_method_filter_and_unlimited_rules() -> None:
    faults = FaultInjector()
    rule_id = faults.add(FaultRule(route="*", method="delete", status=500, count=None))
    assert faults.take("delete_session", "GET") is None
    assert all(faults.take("delete_session", "DELETE") is not None for _ in range(10))
    assert faults.remove(rule_id)
    assert faults.take("delete_session", "DELETE") is None


def test_probabilistic_faults_are_reproducible_with_a_seed() -> None:
    def pattern(seed: int) -> list[bool]:
        faults = FaultInjector(seed=seed)
        faults.add(FaultRule(status=500, count=None, probability=0.5))
        return [faults.take("get_message", "GET") is not None for _ in range(40)]

    assert pattern(3) == pattern(3)
    assert 0 < sum(pattern(3)) < 40


def test_a_fault_needs_an_effect_and_json_round_trips() -> None:
    with pytest.raises(ValueError, match="needs"):
        FaultInjector().add(FaultRule())
    rule = FaultRule(route="acquire_jobs", status=429, retry_after=2, count=3)
    assert FaultRule.from_json(rule.to_json()) == rule
    with pytest.raises(ValueError, match="unknown"):
        FaultRule.from_json({"bogus": 1})


def test_workload_plans_are_reproducible_and_within_bounds() -> None:
    spec = WorkloadSpec(jobs=50, rate=2.0, duration_min=1, duration_max=3, seed=9)
    first = plan(spec)
    assert first == plan(spec)
    assert first != plan(WorkloadSpec(jobs=50, rate=2.0, duration_min=1, duration_max=3, seed=10))
    assert len(first) == 50
    assert all(1 <= job.duration <= 3 for job in first)
    assert [job.at for job in first] == sorted(job.at for job in first)
    assert first[0].at == 0.0


def test_workload_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="rate"):
        WorkloadSpec(rate=0)
    with pytest.raises(ValueError, match="duration"):
        WorkloadSpec(duration_min=5, duration_max=1)
