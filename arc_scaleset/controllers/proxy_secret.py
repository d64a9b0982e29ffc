"""Flattening a ``ProxyConfig`` into the data of a proxy Secret (as ARC's ``ToSecretData``).

The same three keys feed the listener's and the runners' ``http_proxy``/``https_proxy``/``no_proxy``
environment variables and the controller's own GitHub client. Credentials come from the Secrets that
``credentialSecretRef`` names (keys ``username`` and ``password``, in the scale set namespace) and are put
into the proxy URL's user info, percent-encoded.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

from arc_scaleset.api.common import ProxyConfig, ProxyServerConfig
from arc_scaleset.controllers.errors import InvalidSecret
from arc_scaleset.controllers.secrets import ObjectGetter, read_secret_data
from arc_scaleset.github.proxy import proxy_url_secrets
from arc_scaleset.observability.logging import register_secret

HTTP_PROXY_KEY = "http_proxy"
HTTPS_PROXY_KEY = "https_proxy"
NO_PROXY_KEY = "no_proxy"
USERNAME_KEY = "username"
PASSWORD_KEY = "password"


async def proxy_secret_data(kube: ObjectGetter, namespace: str, proxy: ProxyConfig) -> dict[str, str]:
    """``{"http_proxy", "https_proxy", "no_proxy"}`` (always all three keys, possibly empty strings).

    Raises :class:`~arc_scaleset.controllers.errors.SecretNotFound` when a credential Secret is missing,
    :class:`~arc_scaleset.controllers.errors.InvalidSecret` when it lacks ``username``, and lets API errors
    other than NotFound propagate (they are transient).
    """
    return {
        HTTP_PROXY_KEY: await _server_url(kube, namespace, proxy.http, "proxy.http"),
        HTTPS_PROXY_KEY: await _server_url(kube, namespace, proxy.https, "proxy.https"),
        NO_PROXY_KEY: ",".join(proxy.no_proxy or []),
    }


async def _server_url(kube: ObjectGetter, namespace: str, server: ProxyServerConfig | None, field: str) -> str:
    if server is None or not server.url:
        return ""
    if not server.credential_secret_ref:
        return server.url
    data = await read_secret_data(kube, namespace, server.credential_secret_ref, purpose=f"{field}.credentialSecretRef")
    username = data.get(USERNAME_KEY, "")
    if not username:
        raise InvalidSecret(
            f"Secret {namespace}/{server.credential_secret_ref} (named by {field}.credentialSecretRef) has no"
            f" {USERNAME_KEY!r} key: a proxy credential Secret needs {USERNAME_KEY!r} and {PASSWORD_KEY!r}"
        )
    url = with_user_info(server.url, username, data.get(PASSWORD_KEY, ""))
    # Nothing logs it on purpose; redaction catches an accident (the URL's password, in each form it takes).
    for secret in proxy_url_secrets(url):
        register_secret(secret)
    return url


def with_user_info(url: str, username: str, password: str) -> str:
    """``url`` with ``username:password@`` as its user info (replacing any), both percent-encoded."""
    if "://" not in url:
        # Go's url.Parse reads "host:port" as a scheme; proxies are written without a scheme in practice,
        # and an http proxy is what they mean.
        url = "http://" + url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    userinfo = quote(username, safe="") + ":" + quote(password, safe="")
    return urlunsplit((parts.scheme, f"{userinfo}@{host}", parts.path, parts.query, parts.fragment))
