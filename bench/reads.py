#!/usr/bin/env python3
"""Reads every document of a finished job through its results, 100 a page, ROUNDS times over
(API address, job id, API key, rounds), and prints how many were read and how fast."""
import http.client
import json
import sys
import time

def main() -> None:
    api, job, key, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    host, port = api.split(":")
    conn = http.client.HTTPConnection(host, int(port))
    headers = {"authorization": f"Bearer {key}"}
    read, start = 0, time.perf_counter()
    for _ in range(rounds):
        cursor = None
        while True:
            path = f"/api/jobs/{job}/results?limit=100" + (f"&cursor={cursor}" if cursor else "")
            conn.request("GET", path, headers=headers)
            page = json.loads(conn.getresponse().read())
            read += len(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                break
    secs = time.perf_counter() - start
    print(f"documents read    {read} in {secs:.2f} s, {read / secs:.0f}/s")
    print(read)

if __name__ == "__main__":
    main()
