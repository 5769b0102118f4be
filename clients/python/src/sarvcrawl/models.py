"""Typed shapes of requests and answers, as `openapi.yaml` gives them (a test keeps the two in
step: every field here is a property there and every property there is a field here)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict


class ScreenshotOptions(TypedDict, total=False):
    full_page: bool
    width: int
    height: int


class SelectorField(TypedDict, total=False):
    name: str
    selector: str
    type: str
    attribute: str
    fields: List["SelectorField"]
    default: Any


class SelectorSchema(TypedDict, total=False):
    base_selector: str
    fields: List[SelectorField]


class Extract(TypedDict, total=False):
    prompt: str
    schema: Dict[str, Any]


class Webhook(TypedDict, total=False):
    url: str
    events: List[str]
    metadata: Dict[str, Any]


class PageOptions(TypedDict, total=False):
    formats: List[str]
    only_main_content: bool
    include_selectors: List[str]
    exclude_selectors: List[str]
    headers: Dict[str, str]
    timeout_ms: int
    render: bool
    wait_for: str
    wait_ms: int
    screenshot: ScreenshotOptions
    extract: Extract


class ScrapeRequest(PageOptions, total=False):
    url: str
    webhook: Webhook


class CrawlRequest(PageOptions, total=False):
    url: str
    limit: int
    max_depth: int
    include_paths: List[str]
    exclude_paths: List[str]
    allow_subdomains: bool
    allow_external: bool
    use_sitemap: bool
    respect_robots: bool
    max_concurrency: int
    delay_ms: int
    include_documents: bool
    webhook: Webhook


class BatchRequest(PageOptions, total=False):
    urls: List[str]
    ignore_invalid_urls: bool
    respect_robots: bool
    max_concurrency: int
    delay_ms: int
    webhook: Webhook


class MapRequest(TypedDict, total=False):
    url: str
    limit: int
    use_sitemap: bool
    include_subdomains: bool
    search: str
    webhook: Webhook


class SearchRequest(PageOptions, total=False):
    query: str
    limit: int
    scrape: bool
    webhook: Webhook


class MonitorRequest(PageOptions, total=False):
    url: str
    notify_url: str
    interval_seconds: int
    selector: str


class Progress(TypedDict):
    pages_discovered: int
    pages_completed: int
    pages_failed: int
    pages_queued: int


class JobError(TypedDict):
    code: str
    message: str


class Document(TypedDict, total=False):
    url: Optional[str]
    requested_url: Optional[str]
    status_code: Optional[int]
    content_type: Optional[str]
    metadata: Dict[str, Any]
    json: Any
    extract_usage: Dict[str, Any]
    markdown: str
    html: str
    raw_html: str
    text: str
    links: List[str]
    screenshot: Dict[str, Any]
    error: JobError


FINAL = ("completed", "failed", "cancelled")


class Job(dict):
    """A job as `GET /api/jobs/{id}` answers it: the JSON itself, with attributes for the
    fields a program looks at most."""

    @property
    def id(self) -> str:
        return self["job_id"]

    @property
    def kind(self) -> str:
        return self["kind"]

    @property
    def status(self) -> str:
        return self["status"]

    @property
    def is_final(self) -> bool:
        return self.get("status") in FINAL

    @property
    def progress(self) -> Progress:
        return self.get("progress") or {}  # type: ignore[return-value]

    @property
    def error(self) -> Optional[JobError]:
        return self.get("error")

    @property
    def result(self) -> Any:
        """The inline result of a finished single-document job (a scrape's document, a map's
        links, search hits), when the API carries it."""
        return self.get("result")


# The TypedDicts above and the openapi.yaml schema each stands for.
SCHEMAS = {
    "ScreenshotOptions": ScreenshotOptions,
    "SelectorField": SelectorField,
    "SelectorSchema": SelectorSchema,
    "Extract": Extract,
    "Webhook": Webhook,
    "PageOptions": PageOptions,
    "ScrapeRequest": ScrapeRequest,
    "CrawlRequest": CrawlRequest,
    "BatchRequest": BatchRequest,
    "MapRequest": MapRequest,
    "SearchRequest": SearchRequest,
    "MonitorRequest": MonitorRequest,
    "Document": Document,
}
