"""RS256 signing with the system OpenSSL (arc_scaleset/github/rs256.py): signatures GitHub verifies, keys refused
without a passphrase prompt, no error left behind for Python's ssl module, and keys freed when collected."""

from __future__ import annotations

import datetime as dt
import gc
import os
import pty
import select
import ssl
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

from arc_scaleset.github import rs256


@pytest.mark.parametrize("key_format", ["PKCS#1", "PKCS#8"])
def test_a_signature_is_rs256_of_the_message(
    key_format: str, rsa_pem: str, rsa_pkcs8_pem: str, rsa_private_key: rsa.RSAPrivateKey
) -> None:
    key = rs256.load_pem_private_key((rsa_pem if key_format == "PKCS#1" else rsa_pkcs8_pem).encode())
    message = b"header.claims"

    signature = key.sign(message)

    rsa_private_key.public_key().verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
    # PKCS#1 v1.5 signatures are deterministic: the very bytes any RS256 signer makes.
    assert signature == rsa_private_key.sign(message, padding.PKCS1v15(), hashes.SHA256())


def test_one_key_signs_from_several_threads_at_once(rsa_pem: str, rsa_private_key: rsa.RSAPrivateKey) -> None:
    key = rs256.load_pem_private_key(rsa_pem.encode())
    messages = [f"message {index}".encode() for index in range(64)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        signatures = list(pool.map(key.sign, messages))

    for message, signature in zip(messages, signatures, strict=True):
        rsa_private_key.public_key().verify(signature, message, padding.PKCS1v15(), hashes.SHA256())


@pytest.mark.parametrize(
    ("case", "refusal"),
    [
        ("encrypted_rsa_pem", rs256.UnreadableKey),
        ("truncated", rs256.UnreadableKey),
        ("garbage", rs256.UnreadableKey),
        ("empty", rs256.UnreadableKey),
        ("damaged_rsa_pem", rs256.UnreadableKey),
        ("ec_pem", rs256.NotAnRSAKey),
    ],
)
def test_keys_that_are_not_unencrypted_rsa_keys_are_refused(
    case: str, refusal: type[ValueError], request: pytest.FixtureRequest, rsa_pem: str
) -> None:
    made = {
        "truncated": rsa_pem[:-100],
        "garbage": "-----BEGIN RSA PRIVATE KEY-----\nnot base64 at all\n-----END RSA PRIVATE KEY-----\n",
        "empty": "",
    }
    pem = made[case] if case in made else request.getfixturevalue(case)

    with pytest.raises(refusal):
        rs256.load_pem_private_key(pem.encode())


def test_an_encrypted_key_is_refused_without_prompting_on_the_terminal(encrypted_rsa_pem: str) -> None:
    # A child whose controlling terminal is a pseudo-terminal we hold: OpenSSL's default passphrase callback
    # would write a prompt there and wait for an answer that never comes.
    child = f"""
import os, sys
os.close(os.open(os.ttyname(0), os.O_RDWR))  # a session leader opening a terminal makes it its controlling one
from arc_scaleset.github import rs256
try:
    rs256.load_pem_private_key({encrypted_rsa_pem.encode()!r})
except rs256.UnreadableKey:
    print("refused", flush=True)
"""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", child], stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True
    )
    os.close(terminal)
    output = b""
    try:
        deadline = time.monotonic() + 60
        while process.poll() is None and b"pass phrase" not in output and time.monotonic() < deadline:
            if select.select([controller], [], [], 0.5)[0]:
                output += _read(controller)
        output += _read_rest(controller)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        os.close(controller)

    assert b"pass phrase" not in output
    assert output.strip() == b"refused"


def test_after_a_refused_key_pythons_ssl_still_works(ec_pem: str, damaged_rsa_pem: str) -> None:
    # OpenSSL's error queue is shared with the ssl module: an error left in it makes loading a DER CA
    # certificate fail with an unrelated "[OSSL_DECODER] unsupported".
    ca = _self_signed_certificate().public_bytes(serialization.Encoding.DER)
    for pem in (
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        ec_pem.encode(),
        damaged_rsa_pem.encode(),
    ):
        with pytest.raises((rs256.UnreadableKey, rs256.NotAnRSAKey)):
            rs256.load_pem_private_key(pem)

        context = ssl.create_default_context(cadata=ca)

        assert context.cert_store_stats()["x509_ca"] == 1


def test_a_key_is_freed_once_when_collected_and_a_refused_one_at_once(
    monkeypatch: pytest.MonkeyPatch, rsa_pem: str, ec_pem: str
) -> None:
    lib = rs256._libcrypto()
    freed: list[int] = []
    free = lib.EVP_PKEY_free

    def spy(pkey: Any) -> None:
        if pkey:
            freed.append(pkey)
        free(pkey)

    monkeypatch.setattr(lib, "EVP_PKEY_free", spy)

    with pytest.raises(rs256.NotAnRSAKey):
        rs256.load_pem_private_key(ec_pem.encode())
    assert len(freed) == 1

    key = rs256.load_pem_private_key(rsa_pem.encode())
    key.sign(b"used")
    assert len(freed) == 1
    del key
    gc.collect()
    assert len(freed) == 2


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 1024)
    except OSError:  # EIO: the child has closed the terminal
        return b""


def _read_rest(fd: int) -> bytes:
    rest = b""
    while select.select([fd], [], [], 0)[0] and (chunk := _read(fd)):
        rest += chunk
    return rest


def _self_signed_certificate() -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
