"""The etcd engine's URI: ``etcd://host:port[,host:port...][/prefix][?TLS parameters]``.

The TLS parameters are the ones JuiceFS's etcd URLs take, for the same things:

- ``cacert=FILE``: the CA that signed the members' certificates; given, every
  member is reached over TLS and checked against it, host name included;
- ``cert=FILE`` and ``key=FILE``: this client's certificate and key, for an etcd
  run with ``--client-cert-auth`` (they go with ``cacert``);
- ``server-name=NAME``: the name the members' certificates carry, where it is
  not the host dialled (members reached by address).

Files are read and checked here (``cloudfs.tls.load_client_tls``), so a missing
file or a key that is not the certificate's is a ``UsageError`` at start, not
a failed first call. etcd's user/password authentication is not supported:
``user:password@`` in the URI is refused.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from cloudfs.errors import UsageError
from cloudfs.tls import ClientTLS, load_client_tls

DEFAULT_PREFIX = b"cloudfs/"
FORM = (
    "etcd://host:port[,host:port...][/prefix][?cacert=FILE[&cert=FILE&key=FILE][&server-name=NAME]]"
)
TLS_PARAMETERS = ("cacert", "cert", "key", "server-name")


@dataclass(frozen=True)
class EtcdTarget:
    """Where an etcd engine's keys live, and how its members are reached."""

    endpoints: list[str]  # client URLs: https:// when ``tls``
    prefix: bytes
    tls: ClientTLS | None
    server_name: str | None


def parse(uri: str) -> EtcdTarget:
    """``uri`` read (``UsageError`` for anything malformed or unreadable)."""
    url = urllib.parse.urlsplit(uri)
    if url.scheme != "etcd":
        raise UsageError(f"expected {FORM}, got '{uri}'")
    if "@" in url.netloc:
        raise UsageError(
            f"'{uri}': etcd user/password authentication is not supported; "
            "use client certificates (cacert=, cert=, key=)"
        )
    hosts = [h for h in url.netloc.split(",") if h]
    if not hosts:
        raise UsageError(f"expected {FORM}, got '{uri}'")
    params = _parameters(uri, url.query)
    tls = None
    if ("cert" in params) != ("key" in params):
        raise UsageError(f"'{uri}': cert= and key= go together")
    if "cacert" in params:
        tls = load_client_tls(params["cacert"], params.get("cert"), params.get("key"))
    else:
        alone = [name for name in ("cert", "key", "server-name") if name in params]
        if alone:
            raise UsageError(f"'{uri}': {alone[0]}= goes with cacert= (the members' CA)")
    scheme = "https" if tls is not None else "http"
    return EtcdTarget(
        endpoints=[f"{scheme}://{host}" for host in hosts],
        prefix=urllib.parse.unquote_to_bytes(url.path.lstrip("/")) or DEFAULT_PREFIX,
        tls=tls,
        server_name=params.get("server-name"),
    )


def _parameters(uri: str, query: str) -> dict[str, str]:
    """The query's parameters: each known, given once, with a value."""
    params: dict[str, str] = {}
    for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if name not in TLS_PARAMETERS:
            known = ", ".join(f"{p}=" for p in TLS_PARAMETERS)
            raise UsageError(f"'{uri}': unknown parameter '{name}' (known: {known})")
        if name in params:
            raise UsageError(f"'{uri}': {name}= given twice")
        if not value:
            raise UsageError(f"'{uri}': {name}= needs a value")
        params[name] = value
    return params
