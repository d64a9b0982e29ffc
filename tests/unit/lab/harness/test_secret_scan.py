"""The secrets-in-logs check finds what it is meant to find, and names the secret rather than showing it."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson

from arc_scaleset_lab.harness.secret_scan import URL_WITH_PASSWORD_LEAK, SecretLedger, find_leaks, find_leaks_in_objects

PAT = "ghp_0123456789abcdef0123456789abcdef"
KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"
    "q2Zs9kXb1Yx4V3uQ\n"
    "-----END PRIVATE KEY-----\n"
)


def _jit(secret: str) -> str:
    def b64(data: object) -> str:
        return base64.b64encode(orjson.dumps(data)).decode()

    files = {".runner": b64({"agentName": "r"}), ".credentials_rsaparams": b64({"secret": secret})}
    return base64.b64encode(orjson.dumps(files)).decode()


def test_a_token_a_private_key_line_or_a_jit_secret_in_a_log_is_found(tmp_path: Path) -> None:
    ledger = SecretLedger()
    ledger.add(PAT, "PAT")
    ledger.add_private_key(KEY, "App key")
    ledger.add_jit_config(_jit("runner-private-key-material-42"), "JIT config of r")
    log = tmp_path / "x.log"
    log.write_text(
        "clean line\n"
        f"token={PAT}\n"
        "key line MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7 here\n"
        "decoded runner-private-key-material-42\n"
    )

    leaks = find_leaks([log], ledger)

    assert [(leak.line, leak.what) for leak in leaks] == [
        (2, "PAT"),
        (3, "App key"),
        (4, "JIT config of r (private key parameter)"),
    ]
    assert PAT not in "".join(map(str, leaks))
    assert PAT not in repr(ledger)


def test_clean_logs_and_short_values_give_no_leak(tmp_path: Path) -> None:
    ledger = SecretLedger()
    ledger.add("short", "too short to search")
    ledger.add(PAT, "PAT")
    log = tmp_path / "x.log"
    log.write_text("short lines only; token=***\n")
    assert find_leaks([log], ledger) == []
    assert len(ledger) == 1


def test_a_secret_in_an_event_note_a_status_condition_or_an_annotation_is_found_and_named() -> None:
    ledger = SecretLedger()
    ledger.add(PAT, "PAT")
    event = {"kind": "Event", "metadata": {"namespace": "a", "name": "e1"}, "note": f"bad token {PAT}"}
    ars = {
        "kind": "AutoscalingRunnerSet",
        "metadata": {"namespace": "a", "name": "set", "annotations": {"x": "clean"}},
        "status": {"conditions": [{"type": "Degraded", "message": f"GitHub said: {PAT}"}]},
        "spec": {"note": PAT},  # a spec is the user's own input, not what the controller shows
    }
    clean = {"kind": "EphemeralRunner", "metadata": {"namespace": "a", "name": "r"}, "status": {"phase": "Running"}}

    leaks = find_leaks_in_objects([event, ars, clean], ledger)

    assert [str(leak) for leak in leaks] == [
        "Event a/e1 event: PAT",
        "AutoscalingRunnerSet a/set status: PAT",
    ]
    assert all(PAT not in str(leak) for leak in leaks)


def test_a_url_with_an_unmasked_password_is_a_leak_whoever_recorded_it(tmp_path: Path) -> None:
    log = tmp_path / "controller.log"
    log.write_text(
        "dialing http://ops:[REDACTED]@proxy.corp:3128\n"
        "clone https://git@github.com/org/repo\n"
        '{"https_proxy": "http://ops:s3cr3t-pw@proxy.corp:3128"}\n'
    )
    assert [(leak.line, leak.what) for leak in find_leaks([log], SecretLedger())] == [(3, URL_WITH_PASSWORD_LEAK)]
    event = {"kind": "Event", "metadata": {"name": "e"}, "note": "proxy socks5://me:hunter2@p refused"}
    assert [leak.what for leak in find_leaks_in_objects([event], SecretLedger())] == [URL_WITH_PASSWORD_LEAK]
