"""Why a pod is refused: one readable line, shown by kubectl to whoever created it."""

from __future__ import annotations


class Refused(Exception):
    """The pod asked for CloudFS but cannot get it as written; ``code`` is the HTTP status
    the AdmissionReview's ``status`` carries (400: the pod is wrong, 500: we are)."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code
