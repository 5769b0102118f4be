#!/usr/bin/env python3
"""Prints the cost benchmark's figures from the counting proxy's records (see cost.sh).

Prices: us-east-1, on-demand, as written below (transactions are already counted twice in the
capacity units by the proxy).
"""
import argparse
import json
import os
from datetime import datetime

DYNAMODB_WRITE_UNIT = 0.625 / 1e6
DYNAMODB_READ_UNIT = 0.125 / 1e6
SQS_REQUEST = 0.40 / 1e6
S3_PUT = 0.005 / 1000  # PUT, COPY, POST, LIST
S3_GET = 0.0004 / 1000  # GET and the other requests
LAMBDA_GB_SECOND = 0.0000133334  # arm64
API_REQUEST = 1.00 / 1e6  # HTTP API
WORKER_GB = 1024 / 1024  # the worker function's memory (template.yaml)
API_GB = 512 / 1024  # the API functions' memory


def load(work, name):
    with open(os.path.join(work, f"{name}-counts.json")) as f:
        return json.load(f)


def dollars(c, cpu_s=0.0, gb=WORKER_GB, api_requests=0):
    """Cost of what `c` counted, by service."""
    calls = c["calls"]
    s3_put = sum(v for k, v in calls.items() if k.startswith("s3 ")
                 and k.split()[1] in ("PutObject", "PostObject", "ListObjects", "PutBucket"))
    s3_get = sum(v for k, v in calls.items() if k.startswith("s3 ")) - s3_put
    return {
        "DynamoDB writes": sum(c["wcu"].values()) * DYNAMODB_WRITE_UNIT,
        "DynamoDB reads": sum(c["rcu"].values()) * DYNAMODB_READ_UNIT,
        "SQS": sum(v for k, v in calls.items() if k.startswith("sqs ")) * SQS_REQUEST,
        "S3": s3_put * S3_PUT + s3_get * S3_GET,
        "Lambda": cpu_s * gb * LAMBDA_GB_SECOND,
        "API Gateway": api_requests * API_REQUEST,
    }


def table(c, per, unit):
    """Calls and capacity units of `c` divided by `per`."""
    print(f"  {'calls per ' + unit:<40}")
    for k, v in sorted(c["calls"].items()):
        line = f"    {k:<36} {v / per:8.2f}"
        op = k.split()[1]
        if k.startswith("dynamodb ") and (op in c["wcu"] or op in c["rcu"]):
            line += f"   WCU {c['wcu'].get(op, 0) / per:6.2f}  RCU {c['rcu'].get(op, 0) / per:6.2f}"
        print(line)
    print(f"  {'write units per ' + unit:<38} {sum(c['wcu'].values()) / per:8.2f}")
    for k, v in sorted(c.get("wcu_items", {}).items()):
        print(f"    {k:<36} {v / per:8.2f}")
    print(f"  {'read units per ' + unit:<38} {sum(c['rcu'].values()) / per:8.2f}")
    print(f"  {'reads per ' + unit + ', by what they read':<40}")
    for k, v in sorted(c.get("reads", {}).items(), key=lambda kv: -kv[1]):
        print(f"    {k:<60} {v / per:8.2f}")


def costs(d, per, scale, unit):
    total = sum(d.values())
    for k, v in d.items():
        print(f"    {k:<36} ${v / per * scale:.5f}")
    print(f"  {'total, per ' + unit:<38} ${total / per * scale:.5f}")
    return total / per * scale


def main():
    a = argparse.ArgumentParser()
    a.add_argument("work")
    for flag in ("--crawl-cpu", "--scrape-cpu", "--results-secs"):
        a.add_argument(flag, type=float, default=0.0)
    for flag in ("--crawl-requests", "--scrape-requests", "--polls", "--idle", "--workers"):
        a.add_argument(flag, type=int, default=0)
    args = a.parse_args()
    with open(os.path.join(args.work, "crawl.json")) as f:
        crawl = json.load(f)
    pages = crawl["progress"]["pages_completed"] + crawl["progress"]["pages_failed"]

    t = lambda v: datetime.fromisoformat(v.replace("Z", "+00:00"))
    secs = (t(crawl["finished_at"]) - t(crawl["created_at"])).total_seconds()
    print(f"== crawl: {pages} pages ({crawl['status']}) in {secs:.1f} s, {pages / secs:.1f} pages/s,"
          f" {args.workers} worker processes")
    c = load(args.work, "crawl")
    table(c, pages, "page")
    print(f"  CPU per page on the worker path      {args.crawl_cpu / pages * 1000:8.2f} ms")
    per_1000 = costs(dollars(c, args.crawl_cpu, api_requests=args.crawl_requests), pages, 1000,
                     "1,000 pages")

    print("== one scrape job (submit, polls once a second, the worker's task)")
    c = load(args.work, "scrape")
    table(c, 1, "job")
    costs(dollars(c, args.scrape_cpu, api_requests=args.scrape_requests), 1, 1000, "1,000 jobs")

    print("== one status poll (GET /api/jobs/{id} of a finished scrape)")
    c = load(args.work, "poll")
    table(c, args.polls, "poll")
    costs(dollars(c, api_requests=args.polls), args.polls, 1e6, "million polls")

    print("== one page of a crawl's results (GET /results?limit=100)")
    c = load(args.work, "results")
    table(c, 1, "request")
    print(f"  answered in                          {args.results_secs * 1000:8.0f} ms")

    print(f"== idle for {args.idle} s")
    c = load(args.work, "idle")
    table(c, 1, f"{args.idle} s")
    for queue, n in sorted(c["queues"].items()):
        print(f"  SQS receives per 20 s, {queue[-24:]:<14}{n * 20 / args.idle:8.2f}")
    print(f"  (the work queue is polled by the {args.workers} worker processes, the dead-letter"
          " queue by the API process)")
    idle = dollars(c)
    print(f"  idle, per 30-day month               ${sum(idle.values()) * 30 * 86400 / args.idle:.2f}")

    print(f"== verdict: ${per_1000:.4f} per 1,000 crawled pages")


if __name__ == "__main__":
    main()
