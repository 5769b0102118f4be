"""What each operation does, written once for the sync and the async client: generators that
yield the HTTP calls and pauses they need (`Call`, `Pause`) and the items they produce
(`Item`), and are sent back each call's `Reply` (or `Failure`). The clients only drive them."""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Generator, Optional

from . import errors
from .models import Job

#: Pauses before each retry of a call that got no answer or a 5xx (with the same
#: `Idempotency-Key` for a submit, so a retry never starts a second job).
RETRY_PAUSES = (0.5, 1.0, 2.0, 4.0)
#: 429 answers (other than `CONCURRENCY_LIMIT`) waited out in a row before giving up.
MAX_BUSY = 10
#: Longest `Retry-After` waited out.
MAX_RETRY_AFTER = 60.0
#: Polling a job: the first look, the growth of the pause, the longest pause.
FIRST_POLL, POLL_GROWTH, MAX_POLL = 0.5, 1.6, 15.0
#: Documents announced rather than sent as the body (within Lambda's 6 MB once encoded).
DIRECT_UPLOAD = 4 * 1024 * 1024


@dataclass
class Call:
    method: str
    #: A path of the API, or an absolute URL (an upload link: sent without the key).
    path: str
    json: Any = None
    content: Optional[bytes] = None
    params: Optional[Dict[str, Any]] = None
    headers: Dict[str, str] = field(default_factory=dict)


@dataclass
class Pause:
    seconds: float


@dataclass
class Item:
    value: Any


@dataclass
class Reply:
    status: int
    headers: Dict[str, str]
    body: Any

    @property
    def retry_after(self) -> Optional[float]:
        value = self.headers.get("retry-after")
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None


@dataclass
class Failure:
    """The call got no answer (the connection failed or timed out)."""

    error: Exception


Plan = Generator[Any, Any, Any]


def call(c: Call, retry: bool = True) -> Plan:
    """`c`'s successful reply; a refusal as its `ApiError`. Retried after a failure or a 5xx
    when `retry` (every read, and submits, which carry an `Idempotency-Key`); a 429 that is
    not a concurrency limit is waited out."""
    pauses = iter(RETRY_PAUSES)
    busy = 0
    while True:
        reply = yield c
        if isinstance(reply, Failure):
            pause = next(pauses, None) if retry else None
            if pause is None:
                raise errors.TransportError(str(reply.error)) from reply.error
            yield Pause(pause)
            continue
        if 200 <= reply.status < 400:
            return reply
        failure = errors.from_response(reply.status, reply.body)
        if reply.status == 429 and not isinstance(failure, errors.ConcurrencyLimitError) and busy < MAX_BUSY:
            busy += 1
            yield Pause(min(max(reply.retry_after or 1.0, 1.0), MAX_RETRY_AFTER))
            continue
        if reply.status >= 500 and reply.status != 503 and retry:
            pause = next(pauses, None)
            if pause is not None:
                yield Pause(pause)
                continue
        raise failure


def submit(path: str, body: Dict[str, Any], idempotency_key: Optional[str] = None, params=None) -> Plan:
    """A job submitted (`202`), as the API answered it."""
    key = idempotency_key or f"py-{uuid.uuid4()}"
    reply = yield from call(
        Call("POST", path, json=body, params=params, headers={"idempotency-key": key})
    )
    return Job(reply.body)


def get(path: str, params=None) -> Plan:
    reply = yield from call(Call("GET", path, params=params))
    return reply.body


def cancel(job_id: str) -> Plan:
    reply = yield from call(Call("DELETE", f"/api/jobs/{job_id}/cancel"))
    return reply.body


def wait(job_id: str, deadline: Optional[float], on_deadline: str) -> Plan:
    """The job once final. Polls after half a second, then backing off (x1.6, at most 15 s),
    never sooner than the `Retry-After` the API sends; past `deadline` seconds the job is
    cancelled (`on_deadline="cancel"`) or left running, and `DeadlineExceeded` raised."""
    if on_deadline not in ("cancel", "leave"):
        raise ValueError("on_deadline is 'cancel' or 'leave'")
    started = time.monotonic()
    pause = FIRST_POLL
    while True:
        left = None if deadline is None else deadline - (time.monotonic() - started)
        if left is not None and left <= 0:
            job = Job((yield from get(f"/api/jobs/{job_id}")))
            if job.is_final:
                return job
            if on_deadline == "cancel":
                try:
                    yield from cancel(job_id)
                except errors.ApiError as e:
                    if e.code != "JOB_FINISHED":
                        raise
            raise errors.DeadlineExceeded(job_id, job, cancelled=on_deadline == "cancel")
        yield Pause(pause if left is None else min(pause, left))
        reply = yield from call(Call("GET", f"/api/jobs/{job_id}"))
        job = Job(reply.body)
        if job.is_final:
            return job
        # A little jitter, so that many waiting clients do not poll in step.
        pause = min(pause * POLL_GROWTH, MAX_POLL) * random.uniform(0.9, 1.1)
        pause = max(pause, reply.retry_after or 0.0)


def pages(path: str, key: str, page_size: int, filters: Optional[Dict[str, Any]] = None) -> Plan:
    """Every item of a cursor-paged list (`/results`, `/api/jobs` with `filters`)."""
    cursor = None
    while True:
        params: Dict[str, Any] = {**(filters or {}), "limit": page_size}
        if cursor:
            params["cursor"] = cursor
        body = yield from get(path, params)
        for item in body.get(key) or []:
            yield Item(item)
        cursor = body.get("next_cursor")
        if not cursor:
            return None


def logs(job_id: str, after: Optional[int], follow: bool) -> Plan:
    """The job's log entries in order, from after `after`; with `follow`, until the job is
    final and every entry is read."""
    pause = FIRST_POLL
    while True:
        params: Dict[str, Any] = {"limit": 1000}
        if after is not None:
            params["after"] = after
        body = yield from get(f"/api/jobs/{job_id}/logs", params)
        entries = body.get("entries") or []
        for e in entries:
            after = e.get("seq", after)
            yield Item(e)
        if entries:
            pause = FIRST_POLL
            continue
        if not follow:
            return None
        job = Job((yield from get(f"/api/jobs/{job_id}")))
        if job.is_final:
            # The entries written before the end are read once more, then no more.
            follow = False
            continue
        yield Pause(pause)
        pause = min(pause * POLL_GROWTH, MAX_POLL)


def upload(
    data: bytes,
    filename: Optional[str],
    content_type: str,
    params: Dict[str, Any],
    idempotency_key: Optional[str],
) -> Plan:
    """An upload: sent as the body, or (over 4 MiB) announced first and put to the link a
    deployment that cannot take big bodies (AWS) answers with."""
    params = dict(params)
    if filename:
        params["filename"] = filename
    key = idempotency_key or f"py-{uuid.uuid4()}"
    if len(data) > DIRECT_UPLOAD:
        announce = {"filename": filename, "content_type": content_type, "size": len(data)}
        try:
            reply = yield from call(
                Call("POST", "/api/upload", json=announce, params=params, headers={"idempotency-key": key})
            )
        except errors.InvalidRequestError as e:
            if not any(d.get("field") == "body" for d in e.details):
                raise
        else:
            yield from call(
                Call("PUT", reply.body["upload_url"], content=data, headers={"content-type": content_type})
            )
            return Job(reply.body)
    reply = yield from call(
        Call(
            "POST",
            "/api/upload",
            content=data,
            params=params,
            headers={"idempotency-key": key, "content-type": content_type},
        )
    )
    return Job(reply.body)
