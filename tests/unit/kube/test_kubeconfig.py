"""Kubeconfig and in-cluster parsing: what is read, what is rejected, and how the errors read."""

from __future__ import annotations

import base64
import datetime as dt
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from arc_scaleset.clock import FakeClock
from arc_scaleset.kube.client import KubeClient
from arc_scaleset.kube.credentials import BasicAuth, NoToken, StaticToken, TokenFile
from arc_scaleset.kube.errors import KubeconfigError
from arc_scaleset.kube.kubeconfig import default_kubeconfig_paths, load_in_cluster, load_kubeconfig


def _pem_pair(
    common_name: str, *, ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    issuer_cert, issuer_key = ca if ca is not None else (None, key)
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_cert.subject if issuer_cert is not None else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca is None, path_length=None), critical=True)
    )
    return builder.sign(issuer_key, hashes.SHA256()), key


@pytest.fixture(scope="module")
def pki() -> dict[str, bytes]:
    ca_cert, ca_key = _pem_pair("test-ca")
    client_cert, client_key = _pem_pair("admin", ca=(ca_cert, ca_key))
    return {
        "ca": ca_cert.public_bytes(serialization.Encoding.PEM),
        "cert": client_cert.public_bytes(serialization.Encoding.PEM),
        "key": client_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def _config(
    *, user: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None, namespace: str | None = None
) -> dict[str, Any]:
    context: dict[str, Any] = {"cluster": "local", "user": "admin"}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "dev",
        "clusters": [{"name": "local", "cluster": cluster or {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "admin", "user": user if user is not None else {"token": "s3cr3t-token"}}],
        "contexts": [{"name": "dev", "context": context}],
    }


def test_current_context_gives_server_namespace_and_token(tmp_path: Path) -> None:
    path = _write(tmp_path / "config", _config(namespace="team-a"))
    config = load_kubeconfig(path)
    assert config.server == "https://127.0.0.1:6443"
    assert config.namespace == "team-a"
    assert isinstance(config.token_source, StaticToken)
    assert config.token_source.authorization() == "Bearer s3cr3t-token"


def test_namespace_defaults_to_default(tmp_path: Path) -> None:
    assert load_kubeconfig(_write(tmp_path / "config", _config())).namespace == "default"


def test_embedded_certificate_data_is_decoded_and_builds_a_tls_context(tmp_path: Path, pki: dict[str, bytes]) -> None:
    path = _write(
        tmp_path / "config",
        _config(
            cluster={"server": "https://127.0.0.1:6443", "certificate-authority-data": _b64(pki["ca"])},
            user={"client-certificate-data": _b64(pki["cert"]), "client-key-data": _b64(pki["key"])},
        ),
    )
    config = load_kubeconfig(path)
    assert config.ca_data == pki["ca"]
    assert config.client_cert_data == pki["cert"]
    assert isinstance(config.token_source, NoToken)
    context = config.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    # Only the configured CA is trusted, not the system roots.
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "test-ca"),),)]


def test_relative_certificate_files_resolve_against_the_kubeconfig_directory(
    tmp_path: Path, pki: dict[str, bytes]
) -> None:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(pki["ca"])
    (tmp_path / "pki" / "admin.crt").write_bytes(pki["cert"])
    (tmp_path / "pki" / "admin.key").write_bytes(pki["key"])
    path = _write(
        tmp_path / "config",
        _config(
            cluster={"server": "https://127.0.0.1:6443", "certificate-authority": "pki/ca.crt"},
            user={"client-certificate": "pki/admin.crt", "client-key": "pki/admin.key"},
        ),
    )
    config = load_kubeconfig(path)
    assert (config.ca_data, config.client_cert_data, config.client_key_data) == (pki["ca"], pki["cert"], pki["key"])
    assert isinstance(config.ssl_context(), ssl.SSLContext)


def test_mismatched_client_key_is_a_clear_error(tmp_path: Path, pki: dict[str, bytes]) -> None:
    _, other_key = _pem_pair("other")
    other_pem = other_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path = _write(
        tmp_path / "config",
        _config(user={"client-certificate-data": _b64(pki["cert"]), "client-key-data": _b64(other_pem)}),
    )
    config = load_kubeconfig(path)
    with pytest.raises(KubeconfigError, match="client certificate/key cannot be loaded") as caught:
        config.ssl_context()
    assert "PRIVATE KEY" not in str(caught.value)


def test_client_certificate_without_key_is_rejected(tmp_path: Path, pki: dict[str, bytes]) -> None:
    path = _write(tmp_path / "config", _config(user={"client-certificate-data": _b64(pki["cert"])}))
    with pytest.raises(KubeconfigError, match="user 'admin': client-certificate and client-key must be given together"):
        load_kubeconfig(path)


def test_insecure_skip_tls_verify_disables_verification(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "config", _config(cluster={"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True})
    )
    context = load_kubeconfig(path).ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_NONE
    assert context.check_hostname is False


def test_token_file_is_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("file-token\n")
    config = load_kubeconfig(_write(tmp_path / "config", _config(user={"tokenFile": "token"})))
    assert isinstance(config.token_source, TokenFile)
    assert config.token_source.authorization() == "Bearer file-token"


def test_basic_auth_user(tmp_path: Path) -> None:
    config = load_kubeconfig(_write(tmp_path / "config", _config(user={"username": "u", "password": "p"})))
    assert isinstance(config.token_source, BasicAuth)
    assert config.token_source.authorization() == "Basic " + _b64(b"u:p")


def test_named_context_overrides_current_context(tmp_path: Path) -> None:
    data = _config()
    data["clusters"].append({"name": "other", "cluster": {"server": "https://other:443"}})
    data["contexts"].append({"name": "prod", "context": {"cluster": "other", "user": "admin", "namespace": "p"}})
    config = load_kubeconfig(_write(tmp_path / "config", data), context="prod")
    assert (config.server, config.namespace) == ("https://other:443", "p")


def test_missing_context_names_the_file_and_context(tmp_path: Path) -> None:
    path = _write(tmp_path / "config", _config())
    with pytest.raises(KubeconfigError, match=rf"^kubeconfig {path}: context 'foo' not found \(known: dev\)$"):
        load_kubeconfig(path, context="foo")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "nope"
    with pytest.raises(KubeconfigError, match=rf"^kubeconfig {path}: file not found$"):
        load_kubeconfig(path)


def test_missing_user_is_a_clear_error(tmp_path: Path) -> None:
    data = _config()
    data["users"] = []
    path = _write(tmp_path / "config", data)
    with pytest.raises(KubeconfigError, match="user 'admin' \\(of context 'dev'\\) not found"):
        load_kubeconfig(path)


def test_missing_cluster_is_a_clear_error(tmp_path: Path) -> None:
    data = _config()
    data["clusters"] = []
    with pytest.raises(KubeconfigError, match="cluster 'local' \\(of context 'dev'\\) not found"):
        load_kubeconfig(_write(tmp_path / "config", data))


def test_no_current_context_is_a_clear_error(tmp_path: Path) -> None:
    data = _config()
    del data["current-context"]
    with pytest.raises(KubeconfigError, match="no current-context is set"):
        load_kubeconfig(_write(tmp_path / "config", data))


def test_invalid_yaml_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("clusters: [\n  - name: x\n  bad")
    with pytest.raises(KubeconfigError, match="not valid YAML"):
        load_kubeconfig(path)


def test_server_without_scheme_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="must start with https://"):
        load_kubeconfig(_write(tmp_path / "config", _config(cluster={"server": "127.0.0.1:6443"})))


def test_invalid_base64_certificate_data_is_rejected(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "config",
        _config(cluster={"server": "https://127.0.0.1:6443", "certificate-authority-data": "***"}),
    )
    with pytest.raises(KubeconfigError, match="'certificate-authority-data' is not valid base64"):
        load_kubeconfig(path)


def test_exec_plugins_are_reported_as_unsupported(tmp_path: Path) -> None:
    path = _write(tmp_path / "config", _config(user={"exec": {"command": "aws"}}))
    with pytest.raises(KubeconfigError, match="exec credential plugin"):
        load_kubeconfig(path)


def test_kubeconfig_list_merges_with_first_definition_winning(tmp_path: Path) -> None:
    first = _config(namespace="first")
    second = _config(namespace="second")
    second["current-context"] = "other"
    second["contexts"].append({"name": "other", "context": {"cluster": "local", "user": "admin"}})
    second["clusters"] = [{"name": "local", "cluster": {"server": "https://ignored:1"}}]
    paths = [_write(tmp_path / "a", first), tmp_path / "missing", _write(tmp_path / "b", second)]
    config = load_kubeconfig(paths)
    assert (config.server, config.namespace) == ("https://127.0.0.1:6443", "first")
    assert load_kubeconfig(paths, context="other").server == "https://127.0.0.1:6443"


def test_default_paths_follow_the_kubeconfig_variable() -> None:
    assert default_kubeconfig_paths({"KUBECONFIG": "/a:/b"}) == [Path("/a"), Path("/b")]
    assert default_kubeconfig_paths({}) == [Path("~/.kube/config").expanduser()]


def test_reprs_never_show_secrets(tmp_path: Path, pki: dict[str, bytes]) -> None:
    path = _write(
        tmp_path / "config",
        _config(
            cluster={"server": "https://127.0.0.1:6443", "certificate-authority-data": _b64(pki["ca"])},
            user={"token": "s3cr3t-token"},
        ),
    )
    config = load_kubeconfig(path)
    client = KubeClient(config)
    for text in (repr(config), repr(client), repr(config.token_source)):
        assert "s3cr3t-token" not in text
        assert "CERTIFICATE" not in text


def _service_account(tmp_path: Path, pki: dict[str, bytes], token: str = "sa-token-1") -> Path:
    directory = tmp_path / "sa"
    directory.mkdir()
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(pki["ca"])
    (directory / "namespace").write_text("arc-systems")
    return directory


def test_in_cluster_reads_service_host_ca_and_namespace(tmp_path: Path, pki: dict[str, bytes]) -> None:
    directory = _service_account(tmp_path, pki)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = load_in_cluster(env, service_account_dir=directory)
    assert (config.server, config.namespace, config.ca_data) == ("https://10.96.0.1:443", "arc-systems", pki["ca"])
    assert config.token_source.authorization() == "Bearer sa-token-1"


def test_in_cluster_brackets_ipv6_hosts(tmp_path: Path, pki: dict[str, bytes]) -> None:
    directory = _service_account(tmp_path, pki)
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert load_in_cluster(env, service_account_dir=directory).server == "https://[fd00::1]:443"


def test_in_cluster_outside_a_pod_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="not running in a cluster"):
        load_in_cluster({}, service_account_dir=tmp_path)


async def test_in_cluster_token_is_reread_as_it_rotates(tmp_path: Path, pki: dict[str, bytes]) -> None:
    clock = FakeClock()
    directory = _service_account(tmp_path, pki)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    source = load_in_cluster(env, service_account_dir=directory, clock=clock).token_source
    (directory / "token").write_text("sa-token-2")
    assert source.authorization() == "Bearer sa-token-1"  # cached within the reload interval
    await clock.advance(61)
    assert source.authorization() == "Bearer sa-token-2"
    (directory / "token").write_text("sa-token-3")
    assert source.authorization(refresh=True) == "Bearer sa-token-3"  # after a 401


async def test_token_file_keeps_the_last_good_token_when_the_file_vanishes(tmp_path: Path) -> None:
    clock = FakeClock()
    token_path = tmp_path / "token"
    token_path.write_text("t1")
    source = TokenFile(token_path, clock=clock)
    assert source.authorization() == "Bearer t1"
    token_path.unlink()
    await clock.advance(61)
    assert source.authorization() == "Bearer t1"
