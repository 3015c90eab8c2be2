"""GatewayServer: S3's HTTP API, one thread per connection (``lib/http_server.py``).

Each request: parse the path-style URL (``/bucket/key``), authenticate it
(SigV4, ``sigv4.authenticate``) before a byte of its body is read, answer
``Expect: 100-continue`` only then (botocore sends it for PUTs: a refused
request costs no upload), decode the payload (``payload.open_body``:
aws-chunked, checksums, Content-MD5), route it to its operation and write
the answer. Every refusal is an ``S3Error`` rendered as S3's XML; an
``FsError`` from below is translated in ``faults.py``; anything else is
logged with its traceback and answered ``InternalError``. A client that hangs
up mid-answer (s3a aborts a GET's stream when it seeks) is routine: one INFO
line, and its connection is closed. A request whose body was not read to its
end leaves its connection closed afterwards, so the next request on it cannot
start mid-body.

``threads`` bounds the requests served at once (a semaphore), not the
keep-alive connections. ``stop`` stops accepting, lets the requests under way
finish for a grace period, then closes the rest.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Mapping
from typing import BinaryIO, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from cloudfs.errors import FsError
from cloudfs.gateway import payload, sigv4
from cloudfs.gateway.context import Gateway
from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.exchange import Headers, Request, Response
from cloudfs.gateway.faults import s3_error
from cloudfs.gateway.routing import route
from cloudfs.gateway.transfer import ChunkedBody
from cloudfs.lib.http_server import ConnectionHandler, ThreadedHTTPServer
from cloudfs.tls import ServerTLS

log = logging.getLogger(__name__)

IDLE_SECONDS = 120.0  # an idle keep-alive connection is closed after this
_WRITES = frozenset({"PUT", "POST", "DELETE"})


class GatewayServer(ThreadedHTTPServer):
    def __init__(
        self,
        gateway: Gateway,
        address: str,
        keys: Mapping[str, str],
        *,
        threads: int = 32,
        tls: ServerTLS | None = None,
    ) -> None:
        """``address``: HOST:PORT (port 0 picks one: ``port``); ``keys``: access key -> secret;
        ``tls``: serve HTTPS (``cloudfs/tls.py``). ``OSError`` if it cannot listen."""
        super().__init__(
            address, _Handler, name="s3-gateway", threads=threads, idle_seconds=IDLE_SECONDS,
            tls=tls,
        )  # fmt: skip
        self.gateway = gateway
        self.keys = dict(keys)

    def stop(self, grace: float = 10.0) -> None:
        """Stop accepting; wait up to ``grace`` seconds for requests under way; close."""
        super().stop(grace)


class _Handler(ConnectionHandler):
    server_version = "CloudFS"

    @property
    def gateway_server(self) -> GatewayServer:
        return cast(GatewayServer, self.owner)

    def handle_expect_100(self) -> bool:
        return True  # answered once the request has authenticated (``_continue``)

    def do_GET(self) -> None:
        self._serve()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    # -- one request -----------------------------------------------------------

    def _serve(self) -> None:
        started = time.monotonic()
        gw = self.gateway_server.gateway
        metrics = gw.metrics
        op, request_id = "Unknown", uuid.uuid4().hex[:16].upper()
        response: Response
        body: _Counted | None = None
        with self.gateway_server.slot():
            if metrics:
                metrics.in_flight.inc()
            try:
                req = self._request(request_id)
                body = req.body  # type: ignore[assignment]
                op, operation = route(req)
                try:
                    response = operation(gw, req)
                except FsError as e:
                    raise s3_error(e, req.resource, writing=req.method in _WRITES) from e
            except S3Error as e:
                response = self._error(e, request_id)
            except Exception:
                log.exception("%s %s failed", self.command, self.path)
                response = self._error(
                    S3Error(
                        "InternalError", 500, "We encountered an internal error. Please try again."
                    ),
                    request_id,
                )
            try:
                sent = self._send(response, request_id)
            except ConnectionError as e:  # gone before the headers were out: as mid-body
                self._client_left(0, e)
                sent = 0
            finally:
                close = getattr(response.body, "close", None)
                if close is not None:
                    close()  # an object's reads end here, not when its generator is collected
            if body is None or not body.finished():
                self.close_connection = True  # the rest of the body must not be read as a request
            if metrics:
                metrics.in_flight.dec()
                metrics.requests.labels(op, str(response.status)).inc()
                metrics.latency.labels(op).observe(time.monotonic() - started)
                if sent:
                    metrics.bytes.labels(op, "out").inc(sent)
                if body is not None and body.count:
                    metrics.bytes.labels(op, "in").inc(body.count)

    def _request(self, request_id: str) -> Request:
        split = urlsplit(self.path)
        raw_path, raw_query = split.path or "/", split.query
        bucket, _, key = raw_path.lstrip("/").partition("/")
        bucket, key = unquote(bucket), unquote(key)
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        length_text = self.headers.get("Content-Length")
        length: int | None = None
        if length_text is not None:
            if not (length_text.strip().isascii() and length_text.strip().isdigit()):
                raise S3Error("InvalidArgument", 400, "Content-Length is not a number")
            length = int(length_text)
        elif not chunked:  # HTTP/1.1: no Content-Length and not chunked is no body at all
            if self.command == "PUT":
                raise S3Error(
                    "MissingContentLength", 411, "You must provide the Content-Length HTTP header."
                )
            length = 0
        signed = sigv4.authenticate(
            self.command, raw_path, raw_query, self.headers, self.gateway_server.keys
        )
        if self.headers.get("Expect", "").lower() == "100-continue":
            self.send_response_only(100)
            self.end_headers()
        resource = f"/{bucket}/{key}" if key else f"/{bucket}"
        raw = cast(BinaryIO, ChunkedBody(self.rfile) if chunked else self.rfile)
        stream = payload.open_body(
            signed, self.headers, raw, None if chunked else length, resource=resource
        )
        query = dict(parse_qsl(raw_query, keep_blank_values=True))
        headers = Headers([(k, str(v)) for k, v in self.headers.items()])
        return Request(
            self.command,
            bucket,
            key,
            query,
            headers,
            _Counted(stream, length, chunked),
            None if chunked else length,
            access_key=signed.access_key,
            request_id=request_id,
        )

    def _error(self, error: S3Error, request_id: str) -> Response:
        headers = {"Content-Type": "application/xml"}
        headers.update(getattr(error, "headers", {}))
        body = b"" if self.command == "HEAD" else error.to_xml(request_id)
        return Response(error.status, headers, body, length=len(error.to_xml(request_id)))

    def _send(self, response: Response, request_id: str) -> int:
        """Write the answer; the object bytes sent."""
        self.send_response(response.status)
        self.send_header("x-amz-request-id", request_id)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if isinstance(response.body, bytes):
            length = (
                response.length
                if self.command == "HEAD" and response.length is not None
                else len(response.body)
            )
            if response.status not in (204, 304):
                self.send_header("Content-Length", str(length))
            self.end_headers()
            if self.command != "HEAD" and response.body:
                self.wfile.write(response.body)
            return 0
        self.send_header("Content-Length", str(response.length))
        self.end_headers()
        sent = 0
        try:
            for block in response.body:
                self.wfile.write(block)
                sent += len(block)
        except ConnectionError as e:  # the client hung up (s3a aborts a stream on a seek)
            self._client_left(sent, e)
        except FsError as e:  # the object changed or the UFS failed mid-body: the client
            log.warning("GET %s ended after %d bytes: %s", self.path, sent, e)
            self.close_connection = True  # sees a short body and retries, never a mix
        except Exception:
            log.exception("GET %s ended after %d bytes", self.path, sent)
            self.close_connection = True
        return sent

    def _client_left(self, sent: int, error: ConnectionError) -> None:
        """A client that hangs up mid-answer is routine (an aborted stream, a seek, a
        timeout on its side): one line, no traceback, and the connection is closed."""
        log.info(
            "%s %s: client left after %d bytes (%s)",
            self.command,
            urlsplit(self.path).path,  # not the query: a presigned URL's signature grants access
            sent,
            type(error).__name__,
        )
        self.close_connection = True


class _Counted:
    """The decoded body, counting what the operation read (metrics; whether it all was)."""

    def __init__(self, stream: BinaryIO, length: int | None, chunked: bool = False) -> None:
        self._stream = stream
        self.count = 0
        self._eof = not length and not chunked

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.count += len(data)
        if not data or size < 0:
            self._eof = True
        return data

    def finished(self) -> bool:
        if not self._eof:
            with contextlib.suppress(Exception):
                self._eof = not self._stream.read(1)  # at the end without saying so yet
        return self._eof
