#!/usr/bin/env python3
"""Waits for a job to end and prints its last status (JSON). Arguments: API address, job id, key
and, optionally, the seconds between polls (0.2 by default). One process on one kept-alive
connection: a curl and an interpreter started for each poll would take a share of the cores the
benchmark measures."""
import http.client
import json
import sys
import time

def main() -> None:
    api, job, key = sys.argv[1], sys.argv[2], sys.argv[3]
    every = float(sys.argv[4]) if len(sys.argv) > 4 else 0.2
    host, port = api.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    while True:
        conn.request("GET", f"/api/jobs/{job}", headers={"authorization": f"Bearer {key}"})
        body = conn.getresponse().read()
        if json.loads(body)["status"] in ("completed", "failed", "cancelled"):
            sys.stdout.write(body.decode())
            return
        time.sleep(every)

if __name__ == "__main__":
    main()
