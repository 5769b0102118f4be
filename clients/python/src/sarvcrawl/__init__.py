"""SarvCrawl's Python client: pages as clean Markdown, whole sites crawled, pages watched.

    from sarvcrawl import Client

    with Client("http://127.0.0.1:8080", api_key="...") as sc:
        job = sc.wait(sc.crawl("https://example.com/", limit=50), deadline=600)
        for doc in sc.results(job):
            print(doc["url"], len(doc.get("markdown", "")))
"""

from .client import AsyncClient, Client
from .errors import (
    ApiError,
    AuthenticationError,
    ConcurrencyLimitError,
    DeadlineExceeded,
    InvalidRequestError,
    NotFoundError,
    SarvCrawlError,
    TransportError,
    UnavailableError,
    WebhookVerificationError,
)
from .models import Job
from .webhooks import verify_webhook

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "Job",
    "verify_webhook",
    "ApiError",
    "AuthenticationError",
    "ConcurrencyLimitError",
    "DeadlineExceeded",
    "InvalidRequestError",
    "NotFoundError",
    "SarvCrawlError",
    "TransportError",
    "UnavailableError",
    "WebhookVerificationError",
]
