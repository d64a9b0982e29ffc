"""Fixtures for the GitHub client's unit tests."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa


@pytest.fixture(scope="session")
def rsa_private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    form: serialization.PrivateFormat,
    encryption: serialization.KeySerializationEncryption | None = None,
) -> str:
    return key.private_bytes(serialization.Encoding.PEM, form, encryption or serialization.NoEncryption()).decode()


@pytest.fixture(scope="session")
def rsa_pem(rsa_private_key: rsa.RSAPrivateKey) -> str:
    return _pem(rsa_private_key, serialization.PrivateFormat.TraditionalOpenSSL)


@pytest.fixture(scope="session")
def ec_pem() -> str:
    return _pem(ec.generate_private_key(ec.SECP256R1()), serialization.PrivateFormat.PKCS8)


@pytest.fixture(scope="session")
def rsa_pkcs8_pem(rsa_private_key: rsa.RSAPrivateKey) -> str:
    return _pem(rsa_private_key, serialization.PrivateFormat.PKCS8)


@pytest.fixture(scope="session")
def encrypted_rsa_pem(rsa_private_key: rsa.RSAPrivateKey) -> str:
    encryption = serialization.BestAvailableEncryption(b"a passphrase nobody gives")
    return _pem(rsa_private_key, serialization.PrivateFormat.PKCS8, encryption)


@pytest.fixture(scope="session")
def damaged_rsa_pem(rsa_private_key: rsa.RSAPrivateKey) -> str:
    """The RSA key with a wrong private exponent: OpenSSL reads it, but its parts do not belong together."""
    numbers = rsa_private_key.private_numbers()
    damaged = rsa.RSAPrivateNumbers(
        numbers.p, numbers.q, numbers.d + 2, numbers.dmp1, numbers.dmq1, numbers.iqmp, numbers.public_numbers
    ).private_key(unsafe_skip_rsa_key_validation=True)
    return damaged.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()
