"""RSA private keys held by the system OpenSSL, and RS256 signatures made with them.

A GitHub App signs one RS256 JWT per installation-token refresh. Python's ``ssl`` module has already loaded the
system libcrypto, so the key is parsed and the signature made there, through OpenSSL's EVP API, instead of by a
library that brings its own copy of OpenSSL (several MB of resident memory in every listener pod,
docs/github.md "Credentials"). The library is resolved through ``_ssl``'s own handle, so this is the very
libcrypto ``ssl`` uses, whatever its file name, and never a second one.

OpenSSL's error queue is per thread and shared with ``ssl``: an error left in it makes a later, unrelated
``ssl`` call on the same thread fail with a confusing ``SSLError`` (loading a DER CA certificate does). Every
call here therefore empties it before returning, whether it succeeded or not. Errors raised here never carry
key material, nor a chained exception whose frames could hold it.

Thread safety: a loaded key is read-only; each signature has its own digest context, so one key may sign from
several threads at once (OpenSSL 3).
"""

from __future__ import annotations

import ctypes
import functools
import weakref
from collections.abc import Callable
from ctypes import CFUNCTYPE, POINTER, c_char_p, c_int, c_size_t, c_void_p
from typing import Any

# OpenSSL's EVP_PKEY_RSA (NID_rsaEncryption). RSA-PSS keys (NID 912) are refused: GitHub App keys are plain RSA,
# and RS256 is PKCS#1 v1.5 padding, which a PSS-restricted key cannot make.
_EVP_PKEY_RSA = 6

# A 16384-bit RSA key in PEM is about 12 KB; anything far longer is not a key.
_LONGEST_PEM = 1 << 20

# pem_password_cb(char *buf, int size, int rwflag, void *userdata): returning -1 refuses to give a passphrase,
# so an encrypted key fails to load instead of OpenSSL's default callback prompting on the terminal.
_PASSWORD_CALLBACK = CFUNCTYPE(c_int, c_void_p, c_int, c_int, c_void_p)


class UnreadableKey(ValueError):  # noqa: N818 - reads as the condition it reports
    """The text holds no unencrypted PEM private key that OpenSSL can read (garbage, truncated, encrypted)."""


class NotAnRSAKey(ValueError):  # noqa: N818 - reads as the condition it reports
    """The PEM holds a private key of another type (EC, Ed25519, RSA-PSS, ...)."""


class OpenSSLFailure(RuntimeError):  # noqa: N818 - reads as the condition it reports
    """OpenSSL could not be used, or failed to sign with a key it had loaded (not a problem of the key's text)."""


class _LibCrypto:
    """The libcrypto functions used here, with their C signatures declared (pointers as ``c_void_p``: the
    default ``int`` return type would truncate a 64-bit pointer)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        def function(name: str, restype: type | None, *argtypes: type) -> Callable[..., Any]:
            func = lib[name]
            func.restype = restype
            func.argtypes = argtypes
            return func

        self.ERR_clear_error = function("ERR_clear_error", None)
        self.BIO_new_mem_buf = function("BIO_new_mem_buf", c_void_p, c_char_p, c_int)
        self.BIO_free = function("BIO_free", c_int, c_void_p)
        self.PEM_read_bio_PrivateKey = function(
            "PEM_read_bio_PrivateKey", c_void_p, c_void_p, c_void_p, _PASSWORD_CALLBACK, c_void_p
        )
        # OpenSSL 3 renamed EVP_PKEY_base_id; 1.1 has only the old name.
        base_id = "EVP_PKEY_get_base_id" if hasattr(lib, "EVP_PKEY_get_base_id") else "EVP_PKEY_base_id"
        self.EVP_PKEY_get_base_id = function(base_id, c_int, c_void_p)
        self.EVP_PKEY_free = function("EVP_PKEY_free", None, c_void_p)
        self.EVP_PKEY_CTX_new = function("EVP_PKEY_CTX_new", c_void_p, c_void_p, c_void_p)
        self.EVP_PKEY_CTX_free = function("EVP_PKEY_CTX_free", None, c_void_p)
        self.EVP_PKEY_check = function("EVP_PKEY_check", c_int, c_void_p)
        self.EVP_MD_CTX_new = function("EVP_MD_CTX_new", c_void_p)
        self.EVP_MD_CTX_free = function("EVP_MD_CTX_free", None, c_void_p)
        self.EVP_sha256 = function("EVP_sha256", c_void_p)
        self.EVP_DigestSignInit = function(
            "EVP_DigestSignInit", c_int, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p
        )
        self.EVP_DigestSign = function(
            "EVP_DigestSign", c_int, c_void_p, c_void_p, POINTER(c_size_t), c_char_p, c_size_t
        )
        # The callback object must outlive every call that is given it: kept here, for the life of the process.
        self.refuse_password = _PASSWORD_CALLBACK(lambda buf, size, rwflag, userdata: -1)


@functools.cache
def _libcrypto() -> _LibCrypto:
    """The libcrypto ``ssl`` uses, resolved once per process, on first use.

    ``dlsym`` on ``_ssl``'s handle also searches the libraries it depends on, libcrypto among them; a ``_ssl``
    built into the interpreter (no ``__file__``) is searched through the process's global symbols.
    """
    try:
        import _ssl

        path = getattr(_ssl, "__file__", None)
        return _LibCrypto(ctypes.CDLL(path) if path else ctypes.CDLL(None))
    except (ImportError, OSError, AttributeError):
        raise OpenSSLFailure("the OpenSSL library of Python's ssl module could not be loaded") from None


class RSAPrivateKey:
    """An RSA private key held by OpenSSL; freed when this object is collected."""

    __slots__ = ("__weakref__", "_finalizer", "_pkey")

    def __init__(self, pkey: int) -> None:
        """Takes ownership of ``pkey`` (an ``EVP_PKEY *``); use :func:`load_pem_private_key` to make one."""
        self._pkey = pkey
        self._finalizer = weakref.finalize(self, _libcrypto().EVP_PKEY_free, pkey)

    def sign(self, message: bytes) -> bytes:
        """The RS256 signature of ``message``: RSASSA-PKCS1-v1_5 over its SHA-256 digest.

        Raises :class:`OpenSSLFailure` if OpenSSL fails (out of memory, a provider refusing the key).
        """
        lib = _libcrypto()
        ctx = lib.EVP_MD_CTX_new()
        try:
            if not ctx:
                raise OpenSSLFailure("OpenSSL could not allocate a digest context")
            # No EVP_PKEY_CTX is passed, so the RSA default applies: PKCS#1 v1.5 padding, which RS256 is.
            if lib.EVP_DigestSignInit(ctx, None, lib.EVP_sha256(), None, self._pkey) != 1:
                raise OpenSSLFailure("OpenSSL could not start an RS256 signature with the key")
            size = c_size_t(0)
            if lib.EVP_DigestSign(ctx, None, ctypes.byref(size), message, len(message)) != 1:
                raise OpenSSLFailure("OpenSSL could not size the RS256 signature")
            signature = ctypes.create_string_buffer(size.value)
            if lib.EVP_DigestSign(ctx, signature, ctypes.byref(size), message, len(message)) != 1:
                raise OpenSSLFailure("OpenSSL could not make the RS256 signature")
            return signature.raw[: size.value]
        finally:
            lib.EVP_MD_CTX_free(ctx)  # NULL is a no-op
            lib.ERR_clear_error()


def load_pem_private_key(pem: bytes) -> RSAPrivateKey:
    """The RSA private key in ``pem``: PKCS#1 (``BEGIN RSA PRIVATE KEY``) or PKCS#8 (``BEGIN PRIVATE KEY``).

    Raises :class:`UnreadableKey` for anything OpenSSL cannot read as an unencrypted private key (an encrypted
    key is refused without asking for a passphrase) and for a key whose parts do not belong together,
    :class:`NotAnRSAKey` for a key of another type, and :class:`OpenSSLFailure` when OpenSSL itself fails.
    """
    if len(pem) > _LONGEST_PEM:  # also keeps the length within the C int BIO_new_mem_buf takes
        raise UnreadableKey("too long for a PEM private key")
    lib = _libcrypto()
    bio = pkey = None
    try:
        bio = lib.BIO_new_mem_buf(pem, len(pem))  # reads `pem` in place: it outlives the BIO
        if not bio:
            raise OpenSSLFailure("OpenSSL could not allocate a memory buffer")
        pkey = lib.PEM_read_bio_PrivateKey(bio, None, lib.refuse_password, None)
        if not pkey:
            raise UnreadableKey("not an unencrypted PEM private key")
        if lib.EVP_PKEY_get_base_id(pkey) != _EVP_PKEY_RSA:
            raise NotAnRSAKey("not an RSA key")
        if not _consistent(lib, pkey):
            raise UnreadableKey("the key's parts do not belong together")
        key, pkey = RSAPrivateKey(pkey), None  # the key owns it now
        return key
    finally:
        lib.EVP_PKEY_free(pkey)  # NULL is a no-op
        lib.BIO_free(bio)
        lib.ERR_clear_error()


def _consistent(lib: _LibCrypto, pkey: int) -> bool:
    """Whether the key's parts belong together (n = p*q with p and q prime, d and the CRT values matching e).

    A damaged key is refused when it is loaded, as ARC's Go parser refuses it, rather than signing with parts
    that may not match the public key GitHub holds. This check is most of the cost of a load (about 35 ms for a
    2048-bit key: the primality tests); a key is loaded once per client, not once per JWT.
    """
    ctx = lib.EVP_PKEY_CTX_new(pkey, None)
    try:
        if not ctx:
            raise OpenSSLFailure("OpenSSL could not allocate a key context")
        return bool(lib.EVP_PKEY_check(ctx) == 1)
    finally:
        lib.EVP_PKEY_CTX_free(ctx)  # NULL is a no-op
