"""The client against a real `sarvcrawl serve`: every job kind, iterators, a deadline, a 429,
an idempotent retry through a proxy that loses an answer, a webhook verified end to end, the
async client, and the models kept in step with openapi.yaml."""

from __future__ import annotations

import asyncio
import typing

import pytest
import yaml

import sarvcrawl
from sarvcrawl import models

from conftest import KEY, ROOT

DEADLINE = 60


@pytest.fixture
def sc(api):
    with sarvcrawl.Client(api, api_key=KEY) as client:
        yield client


def test_scrape_crawl_and_their_documents(sc, site):
    job = sc.wait(sc.scrape(f"{site}/a", formats=["markdown", "links"]), deadline=DEADLINE)
    assert job.status == "completed", job
    assert job.result["markdown"] == "# Page A\n\nAlpha text."

    crawl = sc.crawl(f"{site}/", limit=10)
    assert crawl.status == "queued" and crawl.kind == "crawl"
    done = sc.wait(crawl, deadline=DEADLINE)
    assert done.progress["pages_completed"] == 3, done
    urls = sorted(d["url"] for d in sc.results(crawl, page_size=1))
    assert urls == [f"{site}/", f"{site}/a", f"{site}/b"]
    messages = [e["message"] for e in sc.logs(crawl)]
    assert any("queued" in m for m in messages), messages
    tree = sc.tree(crawl)
    assert tree["nodes"] == 3 and tree["root"]["url"] == f"{site}/"
    assert any(j["job_id"] == crawl.id for j in sc.jobs(kind="crawl"))
    assert not any(j["job_id"] == crawl.id for j in sc.jobs(kind="scrape"))


def test_batch_map_search_upload_and_monitors(sc, site, receiver):
    batch = sc.batch_scrape([f"{site}/a", f"{site}/b", "not a url"], ignore_invalid_urls=True)
    assert batch["invalid_urls"] == ["not a url"]
    assert sc.wait(batch, deadline=DEADLINE).status == "completed"
    assert sorted(d["url"] for d in sc.results(batch)) == [f"{site}/a", f"{site}/b"]

    mapped = sc.wait(sc.map(f"{site}/"), deadline=DEADLINE)
    assert {link["url"] for link in mapped.result["links"]} >= {f"{site}/a", f"{site}/b"}

    found = sc.wait(sc.search("alpha", limit=2), deadline=DEADLINE)
    hits = found.result["results"]
    assert [h["url"] for h in hits] == [f"{site}/a", f"{site}/b"]
    assert hits[0]["document"]["markdown"] == "# Page A\n\nAlpha text."

    html = b"<html><body><h1>Mine</h1><p>My own text.</p></body></html>"
    up = sc.wait(sc.upload(html, filename="mine.html", formats=["markdown"]), deadline=DEADLINE)
    assert up.result["markdown"] == "# Mine\n\nMy own text."
    # Over 4 MiB: announced first; this server takes it as the body.
    big = b"word " * (1024 * 1024)
    up = sc.wait(sc.upload(big, filename="big.txt", formats=["text"]), deadline=DEADLINE)
    assert up.status == "completed"
    (doc,) = list(sc.results(up))
    assert len(doc["text"]) == len(big)

    first = sc.create_monitor(f"{site}/a", receiver.url, interval_seconds=3600)
    assert first["monitor_id"].startswith("mon_") and first["secret"].startswith("whsec_")
    assert sc.wait(first, deadline=DEADLINE).status == "completed"
    assert [m["monitor_id"] for m in sc.monitors()] == [first["monitor_id"]]
    sc.delete_monitor(first["monitor_id"])
    assert sc.monitors() == []
    with pytest.raises(sarvcrawl.NotFoundError) as e:
        sc.delete_monitor(first["monitor_id"])
    assert e.value.code == "NOT_FOUND"


def test_errors_carry_the_api_s_code(sc, api, site):
    with pytest.raises(sarvcrawl.InvalidRequestError) as e:
        sc.crawl(f"{site}/", limit=0)
    assert e.value.code == "INVALID_REQUEST"
    assert e.value.details[0]["field"] == "limit"
    with pytest.raises(sarvcrawl.AuthenticationError):
        sarvcrawl.Client(api, api_key="wrong-key-0123456789").job("job_01JD0000000000000000000000")
    with pytest.raises(sarvcrawl.UnavailableError) as e:
        sc.scrape(f"{site}/a", extract={"prompt": "the title"})
    assert e.value.code == "EXTRACT_UNAVAILABLE"


def test_a_second_crawl_is_a_429_and_a_deadline_cancels(sc, site):
    slow = sc.crawl(f"{site}/slow", limit=4, max_concurrency=1)
    with pytest.raises(sarvcrawl.ConcurrencyLimitError) as e:
        sc.crawl(f"{site}/")
    assert e.value.status == 429 and e.value.active_job_id == slow.id
    with pytest.raises(sarvcrawl.DeadlineExceeded) as e:
        sc.wait(slow, deadline=1.5, on_deadline="cancel")
    assert e.value.cancelled and e.value.job_id == slow.id
    assert sc.wait(slow, deadline=DEADLINE).status == "cancelled"


def test_a_lost_answer_is_retried_with_the_same_key_and_makes_one_job(losing_proxy, site):
    with sarvcrawl.Client(losing_proxy.url, api_key=KEY) as sc:
        before = {j["job_id"] for j in sc.jobs(kind="scrape")}
        job = sc.scrape(f"{site}/b")
        assert len(losing_proxy.posts) == 2 and losing_proxy.posts[0] == losing_proxy.posts[1]
        after = {j["job_id"] for j in sc.jobs(kind="scrape")}
        assert after - before == {job.id}, "one job for the two tries"
        assert sc.wait(job, deadline=DEADLINE).status == "completed"


def test_a_webhook_verifies_end_to_end(sc, site, receiver):
    secret = sc.webhook_secret()["secret"]
    job = sc.scrape(f"{site}/a", webhook={"url": receiver.url, "events": ["job.completed"]})
    sc.wait(job, deadline=DEADLINE)
    ((body, headers),) = receiver.wait_for(1)
    event = sarvcrawl.verify_webhook(secret, body, headers)
    assert event["type"] == "job.completed" and event["job_id"] == job.id
    with pytest.raises(sarvcrawl.WebhookVerificationError):
        sarvcrawl.verify_webhook(secret, body.replace(b"completed", b"failed"), headers)
    with pytest.raises(sarvcrawl.WebhookVerificationError):
        sarvcrawl.verify_webhook(secret, body, {**headers, "webhook-timestamp": "1"})


def test_the_async_client_does_the_same(api, site):
    async def run():
        async with sarvcrawl.AsyncClient(api, api_key=KEY) as sc:
            job = await sc.crawl(f"{site}/", limit=10)
            done = await sc.wait(job, deadline=DEADLINE)
            urls = sorted([d["url"] async for d in sc.results(job)])
            return done, urls

    done, urls = asyncio.run(run())
    assert done.status == "completed"
    assert urls == [f"{site}/", f"{site}/a", f"{site}/b"]


def properties(spec: dict, name: str) -> set:
    """Every property a schema of openapi.yaml allows, through its `allOf`s."""
    schema = spec["components"]["schemas"][name]
    out = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        out |= properties(spec, part["$ref"].rsplit("/", 1)[1])
    return out


def test_the_models_are_the_openapi_schemas():
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    for name, typed in models.SCHEMAS.items():
        fields = set(typing.get_type_hints(typed))
        assert fields == properties(spec, name), name


def test_the_readme_example_runs(api, site, monkeypatch, capsys):
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- python-example -->\n```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("SARVCRAWL_API_URL", api)
    monkeypatch.setenv("SARVCRAWL_API_KEY", KEY)
    exec(compile(block.replace("https://example.com/", f"{site}/"), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("# Home\n\nWelcome."), out
    assert f"{site}/a 21" in out, out
