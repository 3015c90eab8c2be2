"""What this node has staged and published, kept on disk so a restarted driver re-adopts it.

One JSON file per volume under ``STATE_DIR/volumes`` (0600, written atomically);
the volume's secrets, when it has any, in ``STATE_DIR/secrets`` (0600, and the
directory 0700): a FUSE process that died is restarted with them, since
kubelet does not send them again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cloudfs_csi.tls import TlsFiles

log = logging.getLogger(__name__)


@dataclass
class Publication:
    target_path: str
    read_only: bool
    access_mode: int
    mount_flags: list[str] = field(default_factory=list)


@dataclass
class StagedVolume:
    volume_id: str
    staging_path: str
    uri: str
    access_mode: int
    read_only: bool  # the FUSE mount itself (a read-only access mode)
    mount_flags: list[str]
    options: list[str]  # `cloudfs mount -o` items derived from mount_flags
    context: dict[str, str]
    cache_dir: str
    has_token: bool = False
    has_cache_token: bool = False  # the cache group's token, from the node-stage secret
    targets: dict[str, Publication] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> StagedVolume:
        raw_targets = data.pop("targets", {})
        assert isinstance(raw_targets, dict)
        volume = cls(**data)  # type: ignore[arg-type]
        volume.targets = {path: Publication(**pub) for path, pub in raw_targets.items()}
        return volume


def volume_key(volume_id: str) -> str:
    return hashlib.sha256(volume_id.encode()).hexdigest()[:24]


class StateStore:
    """The node's staged volumes on disk."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self._volumes = self.root / "volumes"
        self._secrets = self.root / "secrets"
        for d in (self.root, self._volumes, self._secrets):
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o700)

    def load_all(self) -> list[StagedVolume]:
        volumes = []
        for path in sorted(self._volumes.glob("*.json")):
            try:
                volumes.append(StagedVolume.from_json(json.loads(path.read_text())))
            except (OSError, ValueError, TypeError, AssertionError) as exc:
                log.error("ignoring unreadable state file %s: %s", path, exc)
        return volumes

    def save(self, volume: StagedVolume) -> None:
        _write_private(self._volumes / f"{volume_key(volume.volume_id)}.json", asdict(volume))

    def delete(self, volume_id: str) -> None:
        key = volume_key(volume_id)
        for path in (
            self._volumes / f"{key}.json",
            self._secrets / f"{key}.env.json",
            self._secrets / f"{key}.token",
            self._secrets / f"{key}.cache-token",
            *(self._secrets / f"{key}.tls-{kind}" for kind in TLS_KINDS),
        ):
            path.unlink(missing_ok=True)

    def save_secrets(
        self,
        volume_id: str,
        env: dict[str, str],
        token: str | None,
        cache_token: str | None = None,
        tls: dict[str, str] | None = None,
    ) -> None:
        """``tls``: PEM text by kind (``ca``, ``cert``, ``key``; ``tls.from_secrets``)."""
        key = volume_key(volume_id)
        _write_private(self._secrets / f"{key}.env.json", env)
        pem = tls or {}
        files = [(".token", token), (".cache-token", cache_token),
                 *((f".tls-{kind}", pem.get(kind)) for kind in TLS_KINDS)]  # fmt: skip
        for suffix, value in files:
            path = self._secrets / f"{key}{suffix}"
            if value:
                _write_private(path, value)
            else:
                path.unlink(missing_ok=True)

    def load_env(self, volume_id: str) -> dict[str, str]:
        path = self._secrets / f"{volume_key(volume_id)}.env.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def token_file(self, volume_id: str) -> str | None:
        """The tree service's token of ``volume_id``, if it has one."""
        path = self._secrets / f"{volume_key(volume_id)}.token"
        return str(path) if path.exists() else None

    def cache_token_file(self, volume_id: str) -> str | None:
        """The cache group's token of ``volume_id``, if its secret had one."""
        path = self._secrets / f"{volume_key(volume_id)}.cache-token"
        return str(path) if path.exists() else None

    def tls_files(self, volume_id: str) -> TlsFiles:
        """The TLS files written from ``volume_id``'s secret (none: an empty ``TlsFiles``)."""
        key = volume_key(volume_id)
        found = {kind: self._secrets / f"{key}.tls-{kind}" for kind in TLS_KINDS}
        paths = {kind: str(p) if p.exists() else None for kind, p in found.items()}
        return TlsFiles(ca=paths["ca"], cert=paths["cert"], key=paths["key"])


TLS_KINDS = ("ca", "cert", "key")


def _write_private(path: Path, data: object) -> None:
    """Write ``data`` (JSON, or a str as is) to ``path`` atomically, mode 0600."""
    text = data if isinstance(data, str) else json.dumps(data, indent=1, sort_keys=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
