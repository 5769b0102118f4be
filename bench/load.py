#!/usr/bin/env python3
"""The API under load: while a crawl keeps the workers busy, submits scrapes (one per user, so
none is refused) and polls the crawl's status, and prints the latency of each at the median and
the 99th percentile. Arguments: API address, the crawl's job id, the crawl user's key, the URL
to scrape, and how many users (keys `load-key-for-user-N`) submit one scrape each. The crawl's own key polls."""
import http.client
import json
import multiprocessing
import statistics
import sys
import time

def timed(conn: http.client.HTTPConnection, method: str, path: str, key: str, body=None):
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    start = time.perf_counter()
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    return time.perf_counter() - start, r.status, data

def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1000

def poll(host, port, job, key, done, results) -> None:
    conn = http.client.HTTPConnection(host, port)
    polls = []
    while not done.is_set():
        secs, status, data = timed(conn, "GET", f"/api/jobs/{job}", key)
        polls.append(secs)
        if status == 200 and json.loads(data)["status"] in ("completed", "failed", "cancelled"):
            break
        time.sleep(0.002)
    results.put(polls)

def main() -> None:
    api, job, crawl_key, url, users = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    host, port = api.split(":")
    submits, refused = [], []
    # The poller is a process of its own: in one process, either side's wait for the other's
    # hold on the interpreter would count as the server's latency.
    done = multiprocessing.Event()
    results = multiprocessing.Queue()
    poller = multiprocessing.Process(target=poll, args=(host, int(port), job, crawl_key, done, results))
    poller.start()
    conn = http.client.HTTPConnection(host, int(port))
    body = json.dumps({"url": url, "formats": ["markdown"]})
    for n in range(users):
        secs, status, _ = timed(conn, "POST", "/api/scrape", f"load-key-for-user-{n}", body)
        (submits if status == 202 else refused).append(secs)
        time.sleep(0.005)
    done.set()
    polls = results.get()
    poller.join()
    for name, xs in (("submit", submits), ("status poll", polls)):
        if xs:
            print(f"{name:<17} {len(xs)} under load: median {statistics.median(xs) * 1000:.1f} ms, "
                  f"p99 {percentile(xs, 0.99):.1f} ms")
    if refused:
        print(f"submits refused   {len(refused)}")

if __name__ == "__main__":
    main()
