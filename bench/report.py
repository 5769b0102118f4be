#!/usr/bin/env python3
"""Prints the crawl benchmark's figures from a final job (stdin), the server's CPU seconds
before and after, its peak RSS (KB) and its CPU seconds by stage (a JSON object)."""
import json
import sys
from datetime import datetime

def main() -> None:
    cpu = float(sys.argv[1]) - float(sys.argv[2])
    rss_kb = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else 0
    stages = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    job = json.load(sys.stdin)
    t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
    secs = (t(job["finished_at"]) - t(job["created_at"])).total_seconds()
    done = job["progress"]["pages_completed"]
    failed = job["progress"]["pages_failed"]
    per_page = lambda s: s / max(done, 1) * 1000
    print(f"status            {job['status']}")
    print(f"pages completed   {done} (failed {failed})")
    print(f"wall time         {secs:.2f} s")
    print(f"pages per second  {done / secs:.1f}")
    print(f"CPU per page      {per_page(cpu):.2f} ms (server process, {cpu:.2f} s in all)")
    if rss_kb:
        print(f"peak RSS          {rss_kb / 1024:.0f} MB")
    if stages:
        print("CPU per page by stage (ms)")
        for name, secs in stages.items():
            print(f"  {name:<15} {per_page(secs):.2f}")
        rest = cpu - sum(stages.values())
        print(f"  {'other':<15} {per_page(rest):.2f} (runtime, HTTP connections, API, timers)")

if __name__ == "__main__":
    main()
