#!/usr/bin/env python3
"""Writes every document of a job (API address, job id, API key, output file) as one JSON object by URL,
without what changes from run to run (fetched_at, elapsed_ms, the site's port), to compare
builds: two runs of the same output give the same file."""
import json
import re
import sys
import urllib.request

def main() -> None:
    api, job, key, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    docs, cursor = {}, None
    while True:
        url = f"http://{api}/api/jobs/{job}/results?limit=100" + (f"&cursor={cursor}" if cursor else "")
        request = urllib.request.Request(url, headers={"authorization": f"Bearer {key}"})
        page = json.load(urllib.request.urlopen(request))
        for d in page["data"]:
            meta = d.get("metadata") or {}
            meta.pop("fetched_at", None)
            meta.pop("elapsed_ms", None)
            docs[d["url"]] = d
        cursor = page.get("next_cursor")
        if not cursor:
            break
    text = json.dumps(docs, sort_keys=True, indent=1)
    with open(out, "w") as f:
        f.write(re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text))
    print(f"documents         {len(docs)} written to {out}")

if __name__ == "__main__":
    main()
