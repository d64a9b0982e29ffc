"""Child-object names: the 8-character hash and the names built from it must equal ARC's."""

from __future__ import annotations

import pytest

from arc_scaleset.api import naming


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # The published FNV-1a 32-bit test vectors (offset basis for the empty input).
        (b"", 0x811C9DC5),
        (b"a", 0xE40C292C),
        (b"foobar", 0xBF9CF968),
    ],
)
def test_fnv32a_matches_the_published_test_vectors(data: bytes, expected: int) -> None:
    assert naming.fnv32a(data) == expected


def test_hash8_of_a_two_letter_namespace_worked_by_hand() -> None:
    """h8("ns"), step by step (prime 0x01000193, so ``x * prime = (x << 24) + x * 0x193`` mod 2**32):

    start 0x811c9dc5
    'n' 0x6e: xor -> 0x811c9dab; 0xab000000 + 0x400c3431 (0x811c9dab * 0x193 mod 2**32) = 0xeb0c3431
    's' 0x73: xor -> 0xeb0c3442; 0x42000000 + 0x043643e6 (0xeb0c3442 * 0x193 mod 2**32) = 0x463643e6
    decimal 1177961446; each digit d maps to alphabet[ord(d) % 27] of "bcdfghjklmnpqrstvwxz2456789":
    '0'->4 '1'->5 '2'->6 '3'->7 '4'->8 '5'->9 '6'->b '7'->c '8'->d '9'->f
    "1177961446" -> "55ccfb588b"; first 8 -> "55ccfb58".
    """
    assert naming.fnv32a(b"ns") == 0x463643E6 == 1177961446
    assert naming.safe_encode("1177961446") == "55ccfb588b"
    assert naming.hash8("ns") == "55ccfb58"


def test_hash8_of_the_empty_string_encodes_the_offset_basis() -> None:
    """FNV-1a of "" is the offset basis 2166136261 -> "65bb57b6b5" -> "65bb57b6"."""
    assert naming.hash8("") == "65bb57b6"


def test_safe_encode_maps_digits_to_the_documented_alphabet() -> None:
    assert naming.safe_encode("0123456789") == "456789bcdf"


def test_runner_proxy_secret_name_hashes_the_namespace() -> None:
    """h8("default"): FNV-1a 0x933b5bde = 2470140894 -> "68c4584df8" -> "68c4584d"."""
    assert naming.runner_proxy_secret_name("arc-runners", "default") == "arc-runners-68c4584d-runner-proxy"


def test_listener_name_hashes_namespace_group_and_url_joined_by_at_signs() -> None:
    """Input "arc-runners@@https://github.com/my-org" (empty group): FNV-1a 0x4b24722e = 1260679726
    -> "56b4bcfc6b" -> "56b4bcfc"."""
    name = naming.autoscaling_listener_name(
        "arc-runners", namespace="arc-runners", runner_group="", github_config_url="https://github.com/my-org"
    )
    assert name == "arc-runners-56b4bcfc-listener"


def test_listener_name_changes_with_the_runner_group_and_the_url() -> None:
    """Input "arc-runners@Default@https://github.com/my-org/my-repo": FNV-1a 0xffcc63cb = 4291584971
    -> "86f59d8fc5" -> "86f59d8f"."""
    name = naming.autoscaling_listener_name(
        "set",
        namespace="arc-runners",
        runner_group="Default",
        github_config_url="https://github.com/my-org/my-repo",
    )
    assert name == "set-86f59d8f-listener"


def test_listener_children_are_named_after_the_listener() -> None:
    listener = "arc-runners-56b4bcfc-listener"
    assert naming.listener_config_secret_name(listener) == f"{listener}-config"
    assert naming.listener_proxy_secret_name(listener) == f"{listener}-proxy"
    assert naming.listener_pod_name(listener) == listener
    assert naming.listener_service_account_name(listener) == listener
    assert naming.listener_role_name(listener) == listener
    assert naming.listener_role_binding_name(listener) == listener


def test_runner_set_and_runner_names() -> None:
    assert naming.ephemeral_runner_set_name("arc-runners") == "arc-runners"
    assert naming.ephemeral_runner_generate_name("arc-runners") == "arc-runners-runner-"
    assert naming.runner_pod_name("arc-runners-runner-x7k2p") == "arc-runners-runner-x7k2p"
    assert naming.runner_jit_secret_name("arc-runners-runner-x7k2p") == "arc-runners-runner-x7k2p"


def test_hash8_hashes_utf8_bytes() -> None:
    # "é" is two UTF-8 bytes; hashing code points instead would give a different value.
    assert naming.hash8("é") == naming.safe_encode(str(naming.fnv32a("é".encode())))[:8]
    assert naming.fnv32a("é".encode()) != naming.fnv32a(b"\xe9")
