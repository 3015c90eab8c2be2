"""TLS material of a volume's mount: the CA that signs the servers' certificates
(tree service, cache workers) and, for mutual TLS, the mount's client certificate.

Two sources, the node-stage secret first, item by item:

    ca.crt (or tlsCa)                  the CA bundle  -> ``cloudfs mount --tls-ca FILE``
    tls.crt + tls.key (tlsCert+tlsKey) a client pair  -> ``--tls-cert FILE --tls-key FILE``

A secret's material is written as 0600 files of the node state (``state.py``),
like the tokens. Otherwise the node plugin's ``--tls-ca-file``,
``--tls-cert-file`` and ``--tls-key-file`` (files mounted in the node pod, by
the paths the mount processes see) apply. A certificate comes with its key:
one without the other is refused (the message names the keys, never a value).

The driver's own calls to the tree service (the controller's CreateVolume and
DeleteVolume, the node's volume check before a mount) use the same material
through ``client_tls``: the node the files its mount is about to get, the
controller its own ``--tls-*-file`` flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from cloudfs.errors import UsageError
from cloudfs.k8s.csi_names import TLS_CA_KEYS, TLS_CERT_KEYS, TLS_KEY_KEYS
from cloudfs.tls import ClientTLS, load_client_tls
from cloudfs_csi.errors import FailedPrecondition, InvalidArgument

CA, CERT, KEY = "ca", "cert", "key"
SECRET_KEYS: dict[str, tuple[str, ...]] = {
    CA: TLS_CA_KEYS,
    CERT: TLS_CERT_KEYS,
    KEY: TLS_KEY_KEYS,
}
ALL_SECRET_KEYS = frozenset(k for keys in SECRET_KEYS.values() for k in keys)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Paths of TLS material as the mount processes see them; None where there is none."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("a TLS client certificate needs its key, and a key its certificate")

    def args(self) -> list[str]:
        """The ``cloudfs mount`` flags naming these files."""
        out: list[str] = []
        for flag, path in (("--tls-ca", self.ca), ("--tls-cert", self.cert),
                           ("--tls-key", self.key)):  # fmt: skip
            if path:
                out += [flag, path]
        return out

    def over(self, fallback: TlsFiles) -> TlsFiles:
        """These files, with ``fallback``'s CA and client pair where these have none."""
        pair = (self.cert, self.key) if self.cert else (fallback.cert, fallback.key)
        return TlsFiles(ca=self.ca or fallback.ca, cert=pair[0], key=pair[1])


def from_secrets(secrets: dict[str, str]) -> dict[str, str]:
    """The TLS material of a volume's secrets, by kind (``ca``, ``cert``, ``key``).

    Raises InvalidArgument for a certificate without its key or the reverse.
    """
    out = {
        kind: value
        for kind, keys in SECRET_KEYS.items()
        if (value := next((secrets[k] for k in keys if secrets.get(k)), None))
    }
    if (CERT in out) != (KEY in out):
        raise InvalidArgument(
            "the node-stage secret has a TLS client certificate without its key or a key "
            "without its certificate: give tls.crt and tls.key (or tlsCert and tlsKey) together"
        )
    return out


def client_tls(files: TlsFiles, whose: str) -> ClientTLS | None:
    """The driver's TLS to the tree service from ``files`` (None without a CA), read now
    so that a rotated certificate applies to the next call.

    Raises FailedPrecondition naming the file when one cannot be used (missing, not
    PEM, a key that is not the certificate's); ``whose`` says where the files come from.
    """
    try:
        return load_client_tls(files.ca, files.cert, files.key)
    except UsageError as exc:
        raise FailedPrecondition(f"TLS material of {whose}: {exc}") from None
