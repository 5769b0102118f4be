"""The sync and async clients. Both have the same methods, written once in `_Api`: each returns
what the client's driver makes of an operation's plan (`_plan`), the value itself for
`Client`, an awaitable for `AsyncClient`; iterators are plain or async iterators alike."""

from __future__ import annotations

import asyncio
import mimetypes
import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import httpx

from . import _plan
from ._plan import Call, Failure, Item, Pause, Reply
from .errors import SarvCrawlError
from .models import Job

#: How long one HTTP call may take.
DEFAULT_TIMEOUT = 30.0
#: Where `SARVCRAWL_API_URL` points when unset.
DEFAULT_URL = "http://127.0.0.1:8080"
WORD = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _options(options: Dict[str, Any]) -> Dict[str, Any]:
    """Keyword options as a body: `None` means "the API's default" and is left out."""
    return {k: v for k, v in options.items() if v is not None}


class _Api:
    """Every operation of the API. The drivers (`_drive`, `_iterate`) are the subclasses'."""

    def __init__(self, api_url: Optional[str], api_key: Optional[str]):
        self.api_url = (api_url or os.environ.get("SARVCRAWL_API_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("SARVCRAWL_API_KEY")

    def _drive(self, plan: _plan.Plan) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _iterate(self, plan: _plan.Plan) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _request(self, c: Call) -> Dict[str, Any]:
        """The arguments of `c` for httpx: the API's URL and key, or an absolute link as is."""
        absolute = c.path.startswith(("http://", "https://"))
        headers = dict(c.headers)
        if not absolute and self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        args: Dict[str, Any] = {
            "method": c.method,
            "url": c.path if absolute else self.api_url + c.path,
            "headers": headers,
            "params": c.params,
        }
        if c.json is not None:
            args["json"] = c.json
        if c.content is not None:
            args["content"] = c.content
        return args

    @staticmethod
    def _reply(resp: httpx.Response) -> Reply:
        try:
            body = resp.json() if resp.content else None
        except ValueError:
            body = None
        return Reply(resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, body)

    # Jobs.

    def scrape(self, url: str, *, idempotency_key: Optional[str] = None, **options: Any) -> Job:
        """Submits a scrape of `url` (options as `ScrapeRequest`: `formats`, `render`,
        `extract`, `webhook`, ...); the job, queued."""
        return self._drive(_plan.submit("/api/scrape", {"url": url, **_options(options)}, idempotency_key))

    def crawl(self, url: str, *, idempotency_key: Optional[str] = None, **options: Any) -> Job:
        """Submits a crawl from `url` (options as `CrawlRequest`: `limit`, `max_depth`, ...)."""
        return self._drive(_plan.submit("/api/crawl", {"url": url, **_options(options)}, idempotency_key))

    def batch_scrape(self, urls: List[str], *, idempotency_key: Optional[str] = None, **options: Any) -> Job:
        """Submits a batch scrape of `urls` (options as `BatchRequest`); with
        `ignore_invalid_urls=True` the job's `invalid_urls` lists those dropped."""
        body = {"urls": list(urls), **_options(options)}
        return self._drive(_plan.submit("/api/batch/scrape", body, idempotency_key))

    def map(self, url: str, *, idempotency_key: Optional[str] = None, **options: Any) -> Job:
        """Submits a map of the site at `url` (options as `MapRequest`)."""
        return self._drive(_plan.submit("/api/map", {"url": url, **_options(options)}, idempotency_key))

    def search(self, query: str, *, idempotency_key: Optional[str] = None, **options: Any) -> Job:
        """Submits a web search for `query`, its hits scraped unless `scrape=False`."""
        return self._drive(_plan.submit("/api/search", {"query": query, **_options(options)}, idempotency_key))

    def upload(
        self,
        document: Union[str, Path, bytes],
        *,
        filename: Optional[str] = None,
        content_type: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        **options: Any,
    ) -> Job:
        """Submits a document of your own (a path, or its bytes with `filename`) for
        extraction; options are query parameters (`formats` as a list, `base_url`,
        `webhook_url`, ...). A document over 4 MiB is announced first and put to the link a
        deployment without big bodies (AWS) answers with."""
        if isinstance(document, (str, Path)):
            path = Path(document)
            data = path.read_bytes()
            filename = filename or path.name
        else:
            data = bytes(document)
        if content_type is None:
            guessed = WORD if (filename or "").lower().endswith(".docx") else None
            content_type = guessed or mimetypes.guess_type(filename or "")[0] or "application/octet-stream"
        params = {
            k: ",".join(v) if isinstance(v, (list, tuple)) else v for k, v in _options(options).items()
        }
        return self._drive(_plan.upload(data, filename, content_type, params, idempotency_key))

    def job(self, job_id: str) -> Job:
        """The job as it stands."""
        return self._drive(_map(_plan.get(f"/api/jobs/{job_id}"), Job))

    def jobs(self, *, kind: Optional[str] = None, status: Optional[str] = None) -> Any:
        """Every job of yours, newest first (an iterator; `kind` and `status` filter)."""
        filters = _options({"kind": kind, "status": status})
        return self._iterate(_plan.pages("/api/jobs", "jobs", 100, filters))

    def wait(self, job: Union[str, Job], *, deadline: Optional[float] = None, on_deadline: str = "leave") -> Job:
        """The job once it is final (completed, failed or cancelled). After `deadline` seconds
        it is cancelled (`on_deadline="cancel"`) or left running (`"leave"`), and
        `DeadlineExceeded` raised."""
        job_id = job.id if isinstance(job, Job) else job
        return self._drive(_plan.wait(job_id, deadline, on_deadline))

    def cancel(self, job: Union[str, Job]) -> Dict[str, Any]:
        """Cancels the job (`ApiError` `JOB_FINISHED` when it already ended)."""
        job_id = job.id if isinstance(job, Job) else job
        return self._drive(_plan.cancel(job_id))

    def results(self, job: Union[str, Job], *, page_size: int = 100) -> Any:
        """Every document of the job, in completion order (an iterator over `/results`)."""
        job_id = job.id if isinstance(job, Job) else job
        return self._iterate(_plan.pages(f"/api/jobs/{job_id}/results", "data", page_size))

    def logs(self, job: Union[str, Job], *, after: Optional[int] = None, follow: bool = False) -> Any:
        """The job's log entries (an iterator); with `follow`, until the job ends."""
        job_id = job.id if isinstance(job, Job) else job
        return self._iterate(_plan.logs(job_id, after, follow))

    def tree(self, job: Union[str, Job]) -> Dict[str, Any]:
        """The job's discovery tree."""
        job_id = job.id if isinstance(job, Job) else job
        return self._drive(_plan.get(f"/api/jobs/{job_id}/tree"))

    # Monitors and webhooks.

    def create_monitor(self, url: str, notify_url: str, *, idempotency_key: Optional[str] = None, **options: Any) -> Job:
        """Watches `url`, POSTing changes to `notify_url`; the first check's job, with
        `monitor_id` and the monitor's `secret`."""
        body = {"url": url, "notify_url": notify_url, **_options(options)}
        return self._drive(_plan.submit("/api/monitors", body, idempotency_key))

    def monitors(self) -> List[Dict[str, Any]]:
        """Your monitors."""
        return self._drive(_map(_plan.get("/api/monitors"), lambda b: b["monitors"]))

    def delete_monitor(self, monitor_id: str) -> None:
        """Stops and deletes a monitor."""
        return self._drive(_map(_plan.call(Call("DELETE", f"/api/monitors/{monitor_id}")), lambda _: None))

    def webhook_secret(self, *, rotate: bool = False) -> Dict[str, Any]:
        """Your webhook signing secret (made on first use); `rotate=True` replaces it, the old
        one signing too for 24 hours."""
        if rotate:
            plan = _map(_plan.call(Call("POST", "/api/webhooks/secret/rotate")), lambda r: r.body)
        else:
            plan = _plan.get("/api/webhooks/secret")
        return self._drive(plan)


def _map(plan: _plan.Plan, f: Any) -> _plan.Plan:
    value = yield from plan
    return f(value)


class Client(_Api):
    """The API, called synchronously.

    >>> with Client("http://127.0.0.1:8080", api_key="...") as sc:
    ...     job = sc.wait(sc.scrape("https://example.com/"))
    ...     print(job.result["markdown"])
    """

    def __init__(self, api_url: Optional[str] = None, api_key: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(api_url, api_key)
        self._http = httpx.Client(timeout=timeout, follow_redirects=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _step(self, step: Any) -> Any:
        if isinstance(step, Pause):
            time.sleep(max(step.seconds, 0.0))
            return None
        try:
            return self._reply(self._http.request(**self._request(step)))
        except httpx.TransportError as e:
            return Failure(e)

    def _drive(self, plan: _plan.Plan) -> Any:
        try:
            step = next(plan)
            while True:
                step = plan.send(self._step(step))
        except StopIteration as done:
            return done.value

    def _iterate(self, plan: _plan.Plan) -> Any:
        try:
            step = next(plan)
            while True:
                if isinstance(step, Item):
                    yield step.value
                    step = next(plan)
                else:
                    step = plan.send(self._step(step))
        except StopIteration:
            return


class AsyncClient(_Api):
    """The API, called from asyncio: the same methods as `Client`, awaited (iterators with
    `async for`)."""

    def __init__(self, api_url: Optional[str] = None, api_key: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(api_url, api_key)
        self._http = httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _step(self, step: Any) -> Any:
        if isinstance(step, Pause):
            await asyncio.sleep(max(step.seconds, 0.0))
            return None
        try:
            return self._reply(await self._http.request(**self._request(step)))
        except httpx.TransportError as e:
            return Failure(e)

    async def _drive(self, plan: _plan.Plan) -> Any:  # type: ignore[override]
        try:
            step = next(plan)
            while True:
                step = plan.send(await self._step(step))
        except StopIteration as done:
            return done.value

    async def _iterate(self, plan: _plan.Plan) -> Any:  # type: ignore[override]
        try:
            step = next(plan)
            while True:
                if isinstance(step, Item):
                    yield step.value
                    step = next(plan)
                else:
                    step = plan.send(await self._step(step))
        except StopIteration:
            return


__all__ = ["Client", "AsyncClient", "SarvCrawlError"]
