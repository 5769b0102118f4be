"""Errors: every answer the API refuses becomes an exception carrying its error code."""

from __future__ import annotations

from typing import Any, Optional


class SarvCrawlError(Exception):
    """Base of every error this client raises."""


class ApiError(SarvCrawlError):
    """The API answered with an error: its HTTP status, `code` (`INVALID_REQUEST`,
    `NOT_FOUND`, ...), message and, for invalid requests, `details` naming each field."""

    def __init__(self, status: int, code: str, message: str, body: Any = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body

    @property
    def details(self) -> list:
        error = self.body.get("error", {}) if isinstance(self.body, dict) else {}
        return list(error.get("details") or [])


class AuthenticationError(ApiError):
    """401: the key is missing or refused."""


class NotFoundError(ApiError):
    """404: no such job or monitor (another user's looks the same)."""


class InvalidRequestError(ApiError):
    """400: the request is invalid; `details` names each field and its problem."""


class ConcurrencyLimitError(ApiError):
    """429 `CONCURRENCY_LIMIT`: an active job of the kind already exists (`active_job_id`)."""

    @property
    def active_job_id(self) -> Optional[str]:
        return self.body.get("error", {}).get("active_job_id") if isinstance(self.body, dict) else None


class UnavailableError(ApiError):
    """503: the deployment lacks the part the request needs (search, rendering, a model)."""


class DeadlineExceeded(SarvCrawlError):
    """`wait()` ran out of time; the job was cancelled or left running as asked."""

    def __init__(self, job_id: str, job: Any, cancelled: bool):
        what = "cancelled" if cancelled else "left running"
        super().__init__(f"job {job_id} did not finish before the deadline ({what})")
        self.job_id = job_id
        self.job = job
        self.cancelled = cancelled


class TransportError(SarvCrawlError):
    """The API could not be reached, or stopped answering, after the retries."""


class WebhookVerificationError(SarvCrawlError):
    """A webhook's signature, timestamp or headers do not check out."""


def from_response(status: int, body: Any) -> ApiError:
    """The exception for an error answer."""
    error = body.get("error", {}) if isinstance(body, dict) else {}
    code = str(error.get("code") or f"HTTP_{status}")
    message = str(error.get("message") or "")
    kind = {
        400: InvalidRequestError,
        401: AuthenticationError,
        404: NotFoundError,
        503: UnavailableError,
    }.get(status, ApiError)
    if status == 429 and code == "CONCURRENCY_LIMIT":
        kind = ConcurrencyLimitError
    return kind(status, code, message, body)
