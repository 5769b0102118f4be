"""`sarvcrawl mcp` as an MCP host runs it: the official Python MCP client starts it on stdio,
lists its tools and calls each against a real `sarvcrawl serve`."""

from __future__ import annotations

import asyncio
import json
import os
import re

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import KEY, ROOT

TOOLS = {"scrape", "crawl", "crawl_status", "crawl_results", "map", "search", "batch_scrape", "extract"}


def binary() -> str:
    return os.environ.get("SARVCRAWL_BIN") or str(ROOT / "target" / "debug" / "sarvcrawl")


def readme_config() -> dict:
    """The MCP hosts' configuration block of the README."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## MCP server", 1)[1]
    block = section.split("```json\n", 1)[1].split("```", 1)[0]
    return json.loads(block)["mcpServers"]["sarvcrawl"]


async def session_run(api: str, calls):
    # Started as the README tells MCP hosts to start it, on this test's server and key.
    config = readme_config()
    args = [api if a == "https://sarvcrawl.example.net" else a for a in config["args"]]
    env = {**os.environ, **config["env"], "SARVCRAWL_API_KEY": KEY}
    command = binary() if config["command"] == "sarvcrawl" else config["command"]
    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await calls(session)


def text(result) -> str:
    assert not result.is_error, result
    return "\n".join(c.text for c in result.content)


def job_id(answer: str) -> str:
    return re.search(r"job_[0-9A-Z]+", answer).group(0)


def read_on(answer: str) -> tuple[str, dict]:
    """The tool and arguments a cut answer's note says to call to read on."""
    found = re.search(r"read on with (\w+) (\{[^\]]*\})\]", answer)
    assert found, answer
    return found.group(1), json.loads(found.group(2))


async def finished(s: ClientSession, job: str) -> str:
    """Follows `job` with crawl_status until it is completed; its last status."""
    for _ in range(200):
        status = text(await s.call_tool("crawl_status", {"job_id": job}))
        if "is completed" in status:
            break
        await asyncio.sleep(0.1)
    return status


def body(answer: str) -> str:
    """A one-document answer's Markdown, without its heading and its note."""
    return answer.split("\n\n", 1)[1].rsplit("\n\n[", 1)[0]


def test_every_tool_answers(api, site):
    async def calls(s: ClientSession):
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == TOOLS

        page = text(await s.call_tool("scrape", {"url": f"{site}/a"}))
        assert page == f"# {site}/a\n\n# Page A\n\nAlpha text."
        # A long page is cut to max_chars with a note saying how to read on.
        cut = text(await s.call_tool("scrape", {"url": f"{site}/long", "max_chars": 100}))
        assert "[cut: characters 0-100 of 5007" in cut, cut
        tool, args = read_on(cut)
        assert (tool, args["document"], args["offset"]) == ("crawl_results", 0, 100), args
        on = text(await s.call_tool(tool, args))
        # The rest of the page from character 100 on: 5,007 characters in all, in one answer.
        assert on.startswith(f"# {site}/long\n\n"), on
        long = body(cut) + body(on)
        assert len(long) == 5007 and body(on).startswith("rd word"), body(on)[:50]

        started = text(await s.call_tool("crawl", {"url": f"{site}/", "limit": 10}))
        crawl = job_id(started)
        status = await finished(s, crawl)
        assert "3 of 3 pages done" in status, status
        first = text(await s.call_tool("crawl_results", {"job_id": crawl, "limit": 2}))
        assert first.count(f"# {site}") == 2 and "cursor" in first, first
        cursor = re.search(r'"cursor": "([^"]+)"', first).group(1)
        rest = text(await s.call_tool("crawl_results", {"job_id": crawl, "cursor": cursor}))
        assert rest.count(f"# {site}") == 1 and "the last of 3 documents" in rest, rest

        urls = text(await s.call_tool("map", {"url": f"{site}/"})).splitlines()
        assert {f"{site}/a", f"{site}/b"} <= set(urls), urls

        hits = text(await s.call_tool("search", {"query": "alpha", "limit": 2}))
        assert "## Page A" in hits and "Alpha text." in hits, hits

        batch = job_id(text(await s.call_tool("batch_scrape", {"urls": [f"{site}/a", f"{site}/b"]})))
        await finished(s, batch)
        docs = text(await s.call_tool("crawl_results", {"job_id": batch}))
        assert "Alpha text." in docs and "Beta text." in docs, docs
        # In an answer of several documents, a cut one's note reads on in that document.
        batch = job_id(text(await s.call_tool("batch_scrape", {"urls": [f"{site}/long", f"{site}/a"]})))
        await finished(s, batch)
        docs = text(await s.call_tool("crawl_results", {"job_id": batch, "max_chars": 600}))
        shown = docs.split(f"# {site}/long\n\n", 1)[1]
        tool, args = read_on(shown)
        assert args["offset"] == 300, args
        on = text(await s.call_tool(tool, {**args, "max_chars": 10000}))
        assert on.startswith(f"# {site}/long\n\n") and body(on) == long[300:], on[:200]

        schema = {"fields": [{"name": "title", "selector": "h1", "type": "text"}]}
        extracted = text(await s.call_tool("extract", {"url": f"{site}/b", "schema": schema}))
        assert extracted == '{\n  "title": "Page B"\n}', extracted
        # A long value is cut with a note whose extract call reads on where the cut was.
        schema = {"fields": [{"name": "text", "selector": "p", "type": "text"}]}
        whole = json.dumps({"text": ("word " * 1000).strip()}, indent=2)
        cut = text(await s.call_tool("extract", {"url": f"{site}/long", "schema": schema, "max_chars": 600}))
        tool, args = read_on(cut)
        assert tool == "extract" and args["offset"] == 600 and set(args) == {"job_id", "offset"}, args
        assert cut.startswith(whole[:600] + "\n\n[cut: characters 0-600 of"), cut[-200:]
        rest = text(await s.call_tool(tool, {**args, "max_chars": 10000}))
        assert whole[:600] + rest == whole, rest[-200:]
        # Without a model the deployment says so; the tool answers the API's error.
        refused = await s.call_tool("extract", {"url": f"{site}/b", "prompt": "the title"})
        assert refused.is_error and "EXTRACT_UNAVAILABLE" in refused.content[0].text

    asyncio.run(session_run(api, calls))
