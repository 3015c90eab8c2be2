"""``NativeGet`` and ``NativePut``: ranged GETs and single-request PUTs in native
code, with the GIL released (obstore).

Every cold byte a mount, a cache worker, warm-up, fsspec or the gateway reads
from S3 is one ranged GET of a block or a run of blocks (``get_range``).
Through botocore, or even ``DirectGet`` (its signer and HTTP session without
the request pipeline), the request and the body's reading run in Python: 0.4-0.9
ms of GIL-held time per small file and 0.6-0.9 s per GiB
(benchmarks/RESULTS-get-clients.md), which caps a node near one core's worth
whatever its cores. obstore (Rust's ``object_store``, on its own tokio runtime)
signs, sends and reads the body with the GIL released: 0.11-0.12 ms per small
file and 0.03-0.22 s per GiB in the same run, the lowest of the clients
measured that can do what the data path needs (If-Match on a range, 404 told
from 412, a custom endpoint over HTTP, timeouts).

The contract is ``DirectGet``'s, so ``S3ObjectStore`` can use either: ``get``
answers a 2xx with the body, and for anything else (a missing key, a changed
ETag, a range past the end, a timeout, a refused request) returns ``None`` and
the caller makes the request through botocore, which owns retries, back-off and
the errors' translation. obstore's own retries are off for the same reason (a
failure costs one native try, then botocore's). Refused credentials turn the
native path off for the store's life, and so do ``MAX_FAILURES_IN_A_ROW``
failures with no success between: the endpoint wants something botocore knows
and this does not.

An HTTPS endpoint whose CA bundle is set through ``AWS_CA_BUNDLE``, which
obstore's TLS does not read, gets no native path (``for_client`` answers
``None`` and ``S3ObjectStore`` uses ``DirectGet``). Nor does a process forked
after obstore made its first request (a DataLoader worker over
``cloudfs.fsspec``): obstore runs every request on one tokio runtime per
process, started by the first, and a child inherits it without its threads (a
GET would hang). ``in_this_process`` is False there, and the store uses
``DirectGet``.

``NativePut`` puts a file below ``PUT_MAX`` in one request (what write-back's
and write-through's uploads of small files are). botocore's ``put_object`` costs
1.5-1.7 ms of client CPU per 110 KiB file, most of it with the GIL held, against
0.6-0.7 ms here (benchmarks/s3_call_cost.py, RESULTS-writes.md): on a mount
writing new files, those uploads compete with the FUSE requests for the one
interpreter. Its contract is the GETs': a failure of any kind hands the upload
to botocore (a PUT sent twice puts the same bytes twice), and the same failures
turn it off. Larger files stay with botocore's resumable multipart upload
(``s3_resumable.py``); obstore reads a single PUT's body into memory whole.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import obstore
from obstore.exceptions import (
    NotModifiedError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import S3Store

from cloudfs.lib import gil_free
from cloudfs.ufs.s3_direct import Body

if TYPE_CHECKING:
    from botocore.credentials import Credentials
    from obstore import GetOptions
    from obstore.store import ClientConfig, S3Credential
    from obstore.store import S3Config as StoreConfig

    from cloudfs.config import S3Config

log = logging.getLogger(__name__)

MAX_FAILURES_IN_A_ROW = 32
PUT_MAX = 8 << 20  # larger bodies: botocore's multipart upload, read from the file
CREDENTIALS_TTL = timedelta(minutes=5)  # then asked of botocore again (it refreshes them)
REQUEST_TIMEOUT = timedelta(minutes=10)  # a whole GET; each read has read_timeout
_REFUSED = (PermissionDeniedError, UnauthenticatedError)  # the native path goes off
# A missing key or another version: this request's answer, not the endpoint's fault.
_ANSWERS = (FileNotFoundError, PreconditionError, NotModifiedError)
# The process whose obstore runtime is running (None: no request made yet). Global
# because the runtime is: one per process, whatever the stores.
_runtime_pid: int | None = None


class _Credentials:
    """obstore's credential callback over botocore's credentials (which refresh
    themselves: instance profiles, SSO, assumed roles)."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def __call__(self) -> S3Credential:
        frozen = self._credentials.get_frozen_credentials()
        return {
            "access_key_id": frozen.access_key or "",
            "secret_access_key": frozen.secret_key or "",
            "token": frozen.token,
            "expires_at": datetime.now(UTC) + CREDENTIALS_TTL,
        }


class _NativePath:
    """What the native GETs and PUTs share: their counters, the check that obstore's
    runtime is this process's, and turning off after failures."""

    request = "request"

    def __init__(self, store: S3Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._failures = 0  # in a row
        self.enabled = True
        self.served = 0  # requests answered here
        self.fell_back = 0  # requests handed back to botocore

    @staticmethod
    def in_this_process() -> bool:
        """False in a child forked after obstore's runtime started: no native request there."""
        return _runtime_pid is None or _runtime_pid == os.getpid()

    def _usable(self) -> bool:
        """Whether to try natively; the first request starts the runtime in this process."""
        global _runtime_pid
        if not self.enabled or not self.in_this_process():
            return False
        _runtime_pid = os.getpid()
        return True

    def _answered(self) -> None:
        with self._lock:
            self.served += 1
            self._failures = 0

    def _failed(self, full_key: str, err: Exception) -> None:
        log.debug("native %s of %r failed (%r): falling back", self.request, full_key, err)
        with self._lock:
            self.fell_back += 1
            if isinstance(err, _REFUSED):
                self._failures = MAX_FAILURES_IN_A_ROW
            elif not isinstance(err, _ANSWERS):
                self._failures += 1
            off = self.enabled and self._failures >= MAX_FAILURES_IN_A_ROW
            if off:
                self.enabled = False
        if off:
            log.info("S3 endpoint refused native %ss (%r): using boto3", self.request, err)


class NativeGet(_NativePath):
    """Ranged GETs of one bucket through obstore (same contract as ``DirectGet``)."""

    request = "GET"

    @classmethod
    def for_client(
        cls, bucket: str, config: S3Config, region: str | None, credentials: Credentials | None
    ) -> NativeGet | None:
        """The native path for ``bucket``, or None where it cannot be had (no
        credentials, an HTTPS endpoint with a private CA bundle)."""
        endpoint = config.effective_endpoint()
        if credentials is None:
            return None
        if os.environ.get("AWS_CA_BUNDLE") and not (endpoint or "").startswith("http://"):
            return None
        options: ClientConfig = {
            "connect_timeout": timedelta(seconds=config.connect_timeout),
            "read_timeout": timedelta(seconds=config.read_timeout),
            "timeout": REQUEST_TIMEOUT,
            "allow_http": bool(endpoint and endpoint.startswith("http://")),
        }
        where: StoreConfig = {"region": region or "us-east-1"}
        if endpoint:  # path-style, as botocore is told for a custom endpoint
            where["endpoint"] = endpoint
            # obstore reads AWS_ENDPOINT_URL_S3 from the environment and lets it win over
            # ``endpoint``; the same key given here wins over the environment.
            where["aws_endpoint_url_s3"] = endpoint
            where["virtual_hosted_style_request"] = False
        try:
            store = S3Store(
                bucket,
                config=where,
                client_options=options,
                retry_config={"max_retries": 0},
                credential_provider=_Credentials(credentials),
            )
        except Exception as err:  # a configuration obstore refuses: botocore's path then
            log.info("no native S3 path for %r: %s", bucket, err)
            return None
        return cls(store)

    def get(
        self, full_key: str, offset: int, length: int, if_match: str | None = None
    ) -> Body | None:
        """``length`` bytes at ``offset`` of ``full_key`` (of ETag ``if_match`` only, if
        given), or None: ask botocore instead."""
        if not self._usable():
            return None
        options: GetOptions = {"range": (offset, offset + length)}
        if if_match:
            options["if_match"] = f'"{if_match}"'
        try:
            # The GIL is released for the request, the body, and the one copy into bytes.
            data = gil_free.copy(obstore.get(self.store, full_key, options=options).bytes())
        except Exception as err:  # any failure: botocore retries it and says what it is
            self._failed(full_key, err)
            return None
        self._answered()
        return Body(data, partial=True)  # obstore checks the answer's Content-Range


class NativePut(_NativePath):
    """Single-request PUTs of files below ``PUT_MAX`` through obstore."""

    request = "PUT"

    def put(self, full_key: str, path: str) -> str | None:
        """Put the file at ``path`` as ``full_key``: the new object's ETag ("" if the
        answer had none), or None: put it through botocore instead."""
        if not self._usable():
            return None
        try:  # the GIL is released for the file's reading, the request and its answer
            result = obstore.put(self.store, full_key, Path(path), use_multipart=False)
        except Exception as err:  # any failure: botocore retries it and says what it is
            self._failed(full_key, err)
            return None
        self._answered()
        return (result.get("e_tag") or "").strip('"')
