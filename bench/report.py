#!/usr/bin/env python3
"""Prints the crawl benchmark's figures from a final job (stdin), the server's CPU seconds
before and after, its peak RSS (KB), its CPU seconds by stage (a JSON object) and, optionally,
its threads' CPU seconds by what they run before and after (bench/threads.py)."""
import json
import sys
from datetime import datetime

# What runs in each group of threads of bench/threads.py (which names the groups).
THREADS = {
    "extraction": "parse, links, Markdown",
    "background": "the workers: fetches, storing, bookkeeping, their calls and connections",
    "database": "the embedded server's SQLite writer and checkpointer",
    "API": "the HTTP API, the benchmark's status polls",
}

def main() -> None:
    cpu = float(sys.argv[1]) - float(sys.argv[2])
    rss_kb = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else 0
    stages = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    threads = [json.loads(a) for a in sys.argv[5:7]]
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
    if len(threads) == 2:
        before, after = threads
        used = {g: after[g] - before.get(g, 0.0) for g in after}
        print("CPU per page by thread (ms)")
        for name, secs in used.items():
            print(f"  {name:<15} {per_page(secs):.2f} ({THREADS.get(name, name)})")
        gone = cpu - sum(used.values())
        print(f"  {'ended':<15} {per_page(gone):.2f} (threads that ended, child processes)")

if __name__ == "__main__":
    main()
