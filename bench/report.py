#!/usr/bin/env python3
"""Prints the crawl benchmark's figures from a final job (stdin) and CPU seconds."""
import json
import sys
from datetime import datetime

def main() -> None:
    cpu = float(sys.argv[1]) - float(sys.argv[2])
    job = json.load(sys.stdin)
    t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
    secs = (t(job["finished_at"]) - t(job["created_at"])).total_seconds()
    done = job["progress"]["pages_completed"]
    failed = job["progress"]["pages_failed"]
    print(f"status            {job['status']}")
    print(f"pages completed   {done} (failed {failed})")
    print(f"wall time         {secs:.2f} s")
    print(f"pages per second  {done / secs:.1f}")
    print(f"CPU per page      {cpu / max(done, 1) * 1000:.2f} ms (server process, {cpu:.2f} s in all)")

if __name__ == "__main__":
    main()
