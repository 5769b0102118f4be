"""The retry rules of one call, driven with scripted replies (a unit test of `_plan`; the
behaviour against a real server is in test_client.py)."""

from __future__ import annotations

import pytest

from sarvcrawl import _plan, errors


def drive(plan, replies):
    """Runs `plan`, answering its calls with `replies` in turn; the pauses it asked for and
    what it returned."""
    pauses, replies = [], iter(replies)
    try:
        step = next(plan)
        while True:
            if isinstance(step, _plan.Pause):
                pauses.append(step.seconds)
                step = plan.send(None)
            else:
                step = plan.send(next(replies))
    except StopIteration as done:
        return pauses, done.value


def reply(status, body=None, **headers):
    return _plan.Reply(status, {k.replace("_", "-"): v for k, v in headers.items()}, body)


def test_a_busy_answer_is_waited_out_for_its_retry_after():
    busy = reply(429, {"error": {"code": "RATE_LIMITED", "message": "slow down"}}, retry_after="3")
    pauses, value = drive(_plan.call(_plan.Call("GET", "/api/jobs")), [busy, busy, reply(200, {"ok": 1})])
    assert pauses == [3.0, 3.0] and value.body == {"ok": 1}


def test_a_lost_answer_and_a_5xx_are_tried_again_then_given_up():
    lost = _plan.Failure(OSError("reset"))
    pauses, value = drive(_plan.call(_plan.Call("POST", "/api/scrape")), [lost, reply(502), reply(202, {})])
    assert pauses == [0.5, 1.0] and value.status == 202
    with pytest.raises(errors.TransportError):
        drive(_plan.call(_plan.Call("GET", "/x")), [lost] * 5)


def test_refusals_are_not_retried():
    limit = reply(429, {"error": {"code": "CONCURRENCY_LIMIT", "message": "busy", "active_job_id": "job_1"}})
    with pytest.raises(errors.ConcurrencyLimitError) as e:
        drive(_plan.call(_plan.Call("POST", "/api/crawl")), [limit])
    assert e.value.active_job_id == "job_1"
    unavailable = reply(503, {"error": {"code": "SEARCH_UNAVAILABLE", "message": "none"}})
    with pytest.raises(errors.UnavailableError):
        drive(_plan.call(_plan.Call("POST", "/api/search")), [unavailable])
