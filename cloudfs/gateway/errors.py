"""S3Error: what the gateway answers a request it cannot carry out, as S3 would.

Every refusal is one of S3's own error codes with its HTTP status, rendered as
S3's XML error document (``to_xml``), so clients raise their usual exceptions
(botocore's ``ClientError`` with ``Error.Code``, pyarrow's ``OSError``).
"""

from __future__ import annotations

from xml.sax.saxutils import escape


class S3Error(Exception):
    def __init__(self, code: str, status: int, message: str, *, resource: str = "") -> None:
        """``code``: S3's error code (``NoSuchKey``, ``SignatureDoesNotMatch``...);
        ``status``: its HTTP status; ``resource``: the bucket or key it is about."""
        super().__init__(f"{code}: {message}")
        self.code = code
        self.status = status
        self.message = message
        self.resource = resource

    def to_xml(self, request_id: str) -> bytes:
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{escape(self.code)}</Code><Message>{escape(self.message)}</Message>"
            f"<Resource>{escape(self.resource)}</Resource><RequestId>{escape(request_id)}</RequestId>"
            "</Error>"
        ).encode()
