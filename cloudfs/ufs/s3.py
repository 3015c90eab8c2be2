"""``S3ObjectStore``: the ObjectStore protocol over any S3-compatible endpoint (boto3).

Design notes:

- One botocore client per store, shared by every thread the mount uses (boto3
  clients are thread-safe; sessions are not, so the session is private too and
  never the process-global default). Its connection pool (64) is larger than the
  mount's thread limiter so threads never queue on sockets.
- No call may hang: every request has connect/read timeouts and a bounded number
  of attempts (``S3Config.max_attempts`` counts the first try), with botocore's
  "standard" retry mode (jittered back-off, retries throttling/5xx/timeouts).
- Every botocore failure goes through ``s3_errors.translate``; callers only ever
  see ``cloudfs.errors``.
- Checksums are only sent/validated when S3 requires them: the default since
  botocore 1.36 (CRC trailers on every PUT) breaks many S3-compatible servers.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import boto3.session
from boto3.exceptions import Boto3Error
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from cloudfs.config import S3Config
from cloudfs.errors import (
    InvalidArgument,
    NameTooLong,
    NotFound,
    ObjectChanged,
    RemoteIOError,
    UfsAccessDenied,
)
from cloudfs.types import ListPage, ObjectInfo
from cloudfs.ufs import s3_resumable
from cloudfs.ufs.interface import check_dir_move
from cloudfs.ufs.s3_direct import Body, DirectGet
from cloudfs.ufs.s3_errors import (
    S3_KEY_MAX,
    error_code,
    http_status,
    patiently,
    translate,
    translating,
    validate_s3_key,
)
from cloudfs.ufs.s3_list import DirectList, bare_etag, from_botocore, mtime_ns, to_list_page
from cloudfs.ufs.s3_native import PUT_MAX, NativeGet, NativePut
from cloudfs.ufs.s3_stream import S3ReadStream

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PiB = 1 << 50
_DELETE_BATCH = 1000  # the DeleteObjects maximum
_RENAME_WORKERS = 16
UPLOAD_THREADS = 8  # parts of one multipart upload sent at once


def _head_info(key: str, resp: Any) -> ObjectInfo:
    return ObjectInfo(
        key=key,
        size=int(resp["ContentLength"]),
        mtime_ns=mtime_ns(resp["LastModified"]),
        etag=bare_etag(resp.get("ETag", "")),
    )


def _is_range_error(err: ClientError) -> bool:
    return error_code(err) == "InvalidRange" or http_status(err) == 416


class S3ObjectStore:
    """Keys of one bucket under an optional prefix, as an ObjectStore.

    Key ``train/0001.jpg`` of a store opened on ``s3://bkt/data`` is the object
    ``data/train/0001.jpg``. Directories are common prefixes or zero-byte
    ``dir/`` marker objects.
    """

    def __init__(self, bucket: str, prefix: str, config: S3Config) -> None:
        self._bucket = bucket
        self._prefix = prefix.strip("/")
        self._config = config
        botocore_config = Config(
            connect_timeout=config.connect_timeout,
            read_timeout=config.read_timeout,
            retries={"total_max_attempts": max(1, config.max_attempts), "mode": "standard"},
            max_pool_connections=64,
            s3={"addressing_style": "path"} if config.endpoint_url else None,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        session = boto3.session.Session()
        self._client: S3Client = session.client(
            "s3",
            endpoint_url=config.endpoint_url,
            region_name=config.region,
            config=botocore_config,
        )
        credentials = session.get_credentials()
        # Ranged GETs and small PUTs: native (obstore) where it can; both defer to botocore.
        self._native = NativeGet.for_client(
            bucket, config, self._client.meta.region_name, credentials
        )
        self._native_put = NativePut(self._native.store) if self._native else None
        self._plain_direct = DirectGet.for_client(self._client, bucket, credentials)
        self._lister = DirectList(self._plain_direct) if self._plain_direct else None
        self._transfer = TransferConfig(
            multipart_threshold=config.multipart_threshold,
            multipart_chunksize=config.multipart_chunksize,
            max_concurrency=8,
            use_threads=True,
            preferred_transfer_client="classic",
        )

    # -- key mapping ---------------------------------------------------------

    @property
    def uri(self) -> str:
        return f"s3://{self._bucket}/{self._prefix}" if self._prefix else f"s3://{self._bucket}"

    @property
    def endpoint_url(self) -> str:
        """The endpoint boto3 resolved (config, AWS_ENDPOINT_URL*, config files, AWS)."""
        return str(self._client.meta.endpoint_url)

    def _full(self, key: str) -> str:
        if key.startswith("/") or key.endswith("/"):
            raise InvalidArgument(f"'{key}': keys have no leading or trailing '/'")
        if not self._prefix:
            return key
        return f"{self._prefix}/{key}" if key else self._prefix

    def _dir_prefix(self, key: str) -> str:
        full = self._full(key)
        return f"{full}/" if full else ""

    # -- ObjectStore ---------------------------------------------------------

    def check(self) -> None:
        """HeadBucket, with one-line messages meant for the CLI."""
        where = self.endpoint_url
        try:
            self._client.head_bucket(Bucket=self._bucket)
        except ClientError as err:
            if error_code(err) in ("404", "NoSuchBucket", "NotFound") or http_status(err) == 404:
                raise NotFound(f"bucket '{self._bucket}' does not exist") from err
            if http_status(err) == 403 or error_code(err) in ("403", "AccessDenied"):
                raise UfsAccessDenied(
                    f"access to bucket '{self._bucket}' denied: check credentials"
                ) from err
            raise translate(err, "") from err
        except (EndpointConnectionError, ConnectTimeoutError) as err:
            raise RemoteIOError(f"cannot reach S3 endpoint URL: {where}") from err
        except ReadTimeoutError as err:
            raise RemoteIOError(
                f"S3 endpoint {where} did not answer within {self._config.read_timeout:g}s"
            ) from err
        except NoCredentialsError as err:
            raise UfsAccessDenied(
                "no AWS credentials found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile"
            ) from err
        except BotoCoreError as err:
            raise translate(err, "") from err

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        listed = self._dir_prefix(prefix)
        params: dict[str, Any] = {
            "Bucket": self._bucket,
            "Prefix": listed,
            "Delimiter": "/",
            "MaxKeys": max(1, min(limit, 1000)),
        }
        if token:
            params["ContinuationToken"] = token
        raw = self._lister.page(listed, token, params["MaxKeys"]) if self._lister else None
        if raw is None:
            with translating(prefix):
                raw = from_botocore(self._client.list_objects_v2(**params))
        return to_list_page(prefix, listed, raw)

    def head(self, key: str) -> ObjectInfo:
        with translating(key):
            resp = self._client.head_object(Bucket=self._bucket, Key=self._full(key))
        return _head_info(key, resp)

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        if offset < 0 or length < 0:
            raise InvalidArgument(f"'{key}': negative range {offset}+{length}")
        full = self._full(key)
        if length == 0:
            return b"" if etag is None else self._checked_empty(key, etag)
        direct = self.direct
        body = direct.get(full, offset, length, etag) if direct is not None else None
        if body is None:
            body = self._get_object_range(key, full, offset, length, etag)
        data = body.data
        if not body.partial and offset > 0:
            data = data[offset : offset + length]  # the server ignored Range
        return data[:length]

    @property
    def direct(self) -> NativeGet | DirectGet | None:
        """The fast path for ranged GETs (None where botocore offers none): its counters.
        Native where it was made in this process (not in a forked child: s3_native.py)."""
        native = self._native
        if native is not None and native.in_this_process():
            return native
        return self._plain_direct

    def _checked_empty(self, key: str, etag: str) -> bytes:
        """No bytes, of version ``etag`` only (S3 takes no empty Range to condition)."""
        if self.head(key).etag != etag:
            raise ObjectChanged(f"'{key}': the object is not the version asked for")
        return b""

    def _get_object_range(
        self, key: str, full: str, offset: int, length: int, etag: str | None = None
    ) -> Body:
        condition: dict[str, Any] = {"IfMatch": f'"{etag}"'} if etag else {}
        try:
            resp = self._client.get_object(
                Bucket=self._bucket,
                Key=full,
                Range=f"bytes={offset}-{offset + length - 1}",
                **condition,
            )
        except ClientError as err:
            if _is_range_error(err):
                return Body(b"", partial=True)  # offset at or past the end (or an empty object)
            raise translate(err, key) from err
        except (BotoCoreError, Boto3Error) as err:
            raise translate(err, key) from err
        with closing(S3ReadStream(resp["Body"], key)) as stream:
            return Body(stream.read(), partial="ContentRange" in resp)

    def get_stream(self, key: str, offset: int) -> BinaryIO:
        if offset < 0:
            raise InvalidArgument(f"'{key}': negative offset {offset}")
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": self._full(key)}
        if offset > 0:
            params["Range"] = f"bytes={offset}-"
        try:
            resp = self._client.get_object(**params)
        except ClientError as err:
            if _is_range_error(err):
                return io.BytesIO(b"")
            raise translate(err, key) from err
        except (BotoCoreError, Boto3Error) as err:
            raise translate(err, key) from err
        skip = offset if offset > 0 and "ContentRange" not in resp else 0
        return cast(BinaryIO, S3ReadStream(resp["Body"], key, skip=skip))

    def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
        """One PutObject below the multipart threshold (natively where it can); above it a
        multipart upload (resumable from the state file ``resume``, see
        ``s3_resumable.py``), then HEAD for the ETag.

        After a multipart upload a concurrent writer of the same key may win
        before the HEAD; the returned info then describes its object, which is
        what readers see.
        """
        full = self._full(key)
        try:
            size = os.path.getsize(path)
            if size < self._config.multipart_threshold:
                return ObjectInfo(key, size, time.time_ns(), self._put_one(key, full, path, size))
            with translating(key):
                s3_resumable.upload(
                    self._client, self._bucket, full, path, resume,
                    self._config.multipart_chunksize, threads=UPLOAD_THREADS,
                )  # fmt: skip
        except OSError as err:
            raise InvalidArgument(f"cannot read upload source {path}: {err.strerror}") from err
        return self.head(key)

    def _put_one(self, key: str, full: str, path: str, size: int) -> str:
        """One PutObject of the file at ``path`` (natively where it can): its ETag."""
        native = self._native_put
        etag = native.put(full, path) if native is not None and size <= PUT_MAX else None
        if etag is not None:
            return etag
        with open(path, "rb") as body, translating(key):
            resp = self._client.put_object(Bucket=self._bucket, Key=full, Body=body)
        return bare_etag(resp.get("ETag", ""))

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        with translating(key):
            self._client.put_object(Bucket=self._bucket, Key=self._full(key), Body=data)
        return self.head(key)

    def delete(self, key: str) -> None:
        with translating(key):
            self._client.delete_object(Bucket=self._bucket, Key=self._full(key))

    def validate_key(self, key: str, *, directory: bool = False) -> None:
        validate_s3_key(self._dir_prefix(key) if directory else self._full(key))

    def make_dir(self, key: str) -> None:
        if not key and not self._prefix:
            return  # the bucket root always exists
        with translating(key):
            self._client.put_object(Bucket=self._bucket, Key=self._dir_prefix(key), Body=b"")

    def remove_dir(self, key: str) -> None:
        """Delete the ``key/`` marker.

        Emptiness is the tree's job: S3 cannot check it atomically with the delete.
        """
        if not key:
            raise InvalidArgument("cannot remove the store root")
        with translating(key):
            self._client.delete_object(Bucket=self._bucket, Key=self._dir_prefix(key))

    def rename(self, src: str, dst: str, etag: str | None = None) -> ObjectInfo:
        """Managed copy (multipart copy above the threshold, so > 5 GiB works), then delete;
        with ``etag``, the copy is conditional (``CopySourceIfMatch``: 412 is
        ``ObjectChanged``)."""
        if src == dst:
            return self.head(src)
        source = {"Bucket": self._bucket, "Key": self._full(src)}
        extra = {"CopySourceIfMatch": f'"{etag}"'} if etag else None
        with translating(src):  # each step again while S3 throttles (``patiently``)
            patiently(lambda: self._client.copy(
                source,  # type: ignore[arg-type]
                self._bucket,
                self._full(dst),
                ExtraArgs=extra,
                Config=self._transfer,
            ))  # fmt: skip
        bucket, old, new = self._bucket, self._full(src), self._full(dst)
        with translating(src):
            patiently(lambda: self._client.delete_object(Bucket=bucket, Key=old))
        with translating(dst):
            resp = patiently(lambda: self._client.head_object(Bucket=bucket, Key=new))
        return _head_info(dst, resp)

    def rename_dir(self, src: str, dst: str) -> None:
        """Copy every object under ``src/`` to ``dst/``, then delete the originals.

        Not atomic: a failure part-way leaves both copies of some objects, and the
        sources untouched. Running the same rename again finishes the job.
        """
        check_dir_move(src, dst)
        src_prefix, dst_prefix = self._dir_prefix(src), self._dir_prefix(dst)
        listed = list(self._walk(src_prefix, src))
        if not listed:
            raise NotFound(f"'{src}': no such directory")
        # Every key below moves: refuse before the first copy if the longest would not fit.
        longest = max(len(key.encode("utf-8", "surrogateescape")) for key, _ in listed)
        if longest - len(src_prefix.encode()) + len(dst_prefix.encode()) > S3_KEY_MAX:
            raise NameTooLong(f"'{dst}': a key below it would pass {S3_KEY_MAX} bytes")

        def copy_one(item: tuple[str, int]) -> None:
            key, size = item
            target = dst_prefix + key[len(src_prefix) :]
            source = {"Bucket": self._bucket, "Key": key}
            with translating(src):
                if size < min(self._config.multipart_threshold, 5 << 30):
                    self._client.copy_object(
                        Bucket=self._bucket,
                        Key=target,
                        CopySource=source,  # type: ignore[arg-type]
                    )
                else:
                    self._client.copy(source, self._bucket, target, Config=self._transfer)  # type: ignore[arg-type]

        with ThreadPoolExecutor(max_workers=_RENAME_WORKERS) as pool:
            for _ in pool.map(copy_one, listed):
                pass
        self._delete_many([key for key, _ in listed], src)

    def _walk(self, full_prefix: str, key: str) -> Iterator[tuple[str, int]]:
        """(full key, size) of every object under ``full_prefix``, no delimiter."""
        paginator = self._client.get_paginator("list_objects_v2")
        with translating(key):
            for page in paginator.paginate(Bucket=self._bucket, Prefix=full_prefix):
                for obj in page.get("Contents", []):
                    yield obj["Key"], int(obj["Size"])

    def _delete_many(self, keys: list[str], key: str) -> None:
        for start in range(0, len(keys), _DELETE_BATCH):
            batch = keys[start : start + _DELETE_BATCH]
            with translating(key):
                resp = self._client.delete_objects(
                    Bucket=self._bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            errors = resp.get("Errors", [])
            if errors:
                first = errors[0]
                raise RemoteIOError(
                    f"'{key}': {len(errors)} deletes failed, first "
                    f"{first.get('Key')}: {first.get('Code')} {first.get('Message')}"
                )

    def statfs(self) -> tuple[int, int]:
        return (PiB, PiB)
