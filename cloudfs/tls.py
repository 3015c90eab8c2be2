"""TLS for the network services and their clients, and the rule for plaintext listeners.

Servers (the tree service over gRPC, cache workers and the S3 gateway over
HTTP) are given a ``ServerTLS``: a certificate chain and key, and optionally
a client CA, in which case every client must present a certificate it signed
(mTLS). Clients are given a ``ClientTLS``: the CA that signed the servers'
certificates, and optionally their own certificate and key. Both are loaded
and checked once, at start (``load_server_tls``, ``load_client_tls``): a file
that is missing, unreadable or not PEM, or a key that is not the
certificate's, is a ``UsageError`` naming the file, not a failure of the
first connection.

Server certificates are verified, host name included: a certificate must
name (SAN) the host or address its clients dial.

``check_listener`` is the rule for plaintext: a listener reachable from
other hosts (not loopback, not a UNIX socket) must serve TLS unless the
operator says ``--insecure``, which is then logged loudly once.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from cloudfs.errors import UsageError

TLS_CA_ENV = "CLOUDFS_TLS_CA"
TLS_CERT_ENV = "CLOUDFS_TLS_CERT"
TLS_KEY_ENV = "CLOUDFS_TLS_KEY"
HANDSHAKE_SECONDS = 10.0  # a connection that has not finished its handshake by then is dropped


def is_loopback(listen: str) -> bool:
    """Whether a listen address is reachable from this host only: ``127.0.0.0/8``,
    ``[::1]``, ``localhost``, or a UNIX socket (``unix:PATH`` or an absolute path)."""
    if listen.startswith(("unix:", "/")):
        return True
    host = listen.rsplit(":", 1)[0].strip("[]") if ":" in listen else listen
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listener(
    listen: str, tls: ServerTLS | None, *, insecure: bool, log: logging.Logger
) -> None:
    """Refuse (``UsageError``) a plaintext listener beyond loopback unless ``insecure``;
    with ``insecure`` such a listener is allowed and a WARNING says so."""
    if tls is not None or is_loopback(listen):
        return
    if not insecure:
        raise UsageError(
            f"listening on {listen} without TLS: give --tls-cert and --tls-key "
            "(or --insecure, only on a network you trust)"
        )
    log.warning(
        "INSECURE: listening on %s without TLS (--insecure): tokens and data cross the "
        "network in plaintext",
        listen,
    )


def _read(path: str, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror or e}") from None
    if b"-----BEGIN " not in data:
        raise UsageError(f"{what} {path} is not a PEM file")
    return data


def _cert_chain_checked(context: ssl.SSLContext, cert: str, key: str) -> None:
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as e:
        reason = "the key does not match the certificate" if "MISMATCH" in str(e) else e.reason
        raise UsageError(f"cannot use TLS certificate {cert} with key {key}: {reason}") from None
    except OSError as e:
        raise UsageError(f"cannot use TLS certificate {cert}: {e.strerror or e}") from None


def _ca_checked(context: ssl.SSLContext, ca: str) -> None:
    try:
        context.load_verify_locations(cafile=ca)
    except (ssl.SSLError, OSError) as e:
        raise UsageError(f"cannot use CA file {ca}: {getattr(e, 'reason', None) or e}") from None


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """A server's certificate chain and key (PEM files, read at load), and the CA whose
    client certificates it requires (None: no client certificate asked for)."""

    cert_file: str
    key_file: str
    client_ca_file: str | None
    cert: bytes
    key: bytes
    client_ca: bytes | None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        _cert_chain_checked(context, self.cert_file, self.key_file)
        if self.client_ca_file is not None:
            _ca_checked(context, self.client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def grpc_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )

    def wrap_listener(self, sock: socket.socket) -> ssl.SSLSocket:
        """The listening socket of an HTTP server, its accepted connections TLS; each
        handshake is left to the connection's own thread (``handshake``), so a slow or
        plaintext client holds up no other."""
        return self.ssl_context().wrap_socket(sock, server_side=True, do_handshake_on_connect=False)


def handshake(conn: socket.socket) -> None:
    """Finish the TLS handshake of an accepted connection (a no-op for plaintext),
    within ``HANDSHAKE_SECONDS``; ``OSError``/``ssl.SSLError`` if the client fails it."""
    if isinstance(conn, ssl.SSLSocket):
        timeout = conn.gettimeout()
        conn.settimeout(HANDSHAKE_SECONDS)
        conn.do_handshake()
        conn.settimeout(timeout)


def load_server_tls(
    cert: str | None, key: str | None, client_ca: str | None = None
) -> ServerTLS | None:
    """``--tls-cert``, ``--tls-key``, ``--tls-client-ca`` checked (``UsageError``);
    None when none is given."""
    if cert is None and key is None:
        if client_ca is not None:
            raise UsageError("--tls-client-ca goes with --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise UsageError("--tls-cert and --tls-key go together")
    tls = ServerTLS(
        cert_file=cert,
        key_file=key,
        client_ca_file=client_ca,
        cert=_read(cert, "TLS certificate"),
        key=_read(key, "TLS key"),
        client_ca=_read(client_ca, "client CA file") if client_ca is not None else None,
    )
    tls.ssl_context()  # a mismatched key or a bad CA is said now
    return tls


@dataclass(frozen=True, slots=True)
class ClientTLS:
    """The CA that signed the servers' certificates and, for mTLS, this client's
    certificate and key (PEM files, read at load)."""

    ca_file: str
    cert_file: str | None
    key_file: str | None
    ca: bytes
    cert: bytes | None
    key: bytes | None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, host name included
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        _ca_checked(context, self.ca_file)
        if self.cert_file is not None and self.key_file is not None:
            _cert_chain_checked(context, self.cert_file, self.key_file)
        return context

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert
        )


def load_client_tls(
    ca: str | None, cert: str | None = None, key: str | None = None
) -> ClientTLS | None:
    """``--tls-ca`` (TLS on), ``--tls-cert`` and ``--tls-key`` (a client certificate)
    checked (``UsageError``); None without a CA."""
    if ca is None:
        if cert is not None or key is not None:
            raise UsageError("a TLS client certificate (tls_cert, tls_key) needs the CA (tls_ca)")
        return None
    if (cert is None) != (key is None):
        raise UsageError("the TLS client certificate and key (tls_cert, tls_key) go together")
    tls = ClientTLS(
        ca_file=ca,
        cert_file=cert,
        key_file=key,
        ca=_read(ca, "CA file"),
        cert=_read(cert, "TLS certificate") if cert is not None else None,
        key=_read(key, "TLS key") if key is not None else None,
    )
    tls.ssl_context()
    return tls


def client_tls(ca: str | None, cert: str | None, key: str | None) -> ClientTLS | None:
    """A client's TLS from its flags or storage options or, for each one not given, from
    ``$CLOUDFS_TLS_CA``, ``$CLOUDFS_TLS_CERT``, ``$CLOUDFS_TLS_KEY``."""
    return load_client_tls(
        ca or os.environ.get(TLS_CA_ENV) or None,
        cert or os.environ.get(TLS_CERT_ENV) or None,
        key or os.environ.get(TLS_KEY_ENV) or None,
    )
