#!/usr/bin/env python3
"""A counting proxy in front of the AWS emulator, for the cost benchmark.

Every DynamoDB, SQS and S3 call passes through unchanged (its Host header kept, so its
signature still holds) and is counted by operation. DynamoDB calls are also priced in capacity
units the way on-demand mode bills them:

- a write costs one unit per KB of the larger of the item before and after it (at least one,
  also when its condition fails); in a transaction twice that;
- each secondary index whose entry is added, removed or changed costs one unit per KB of the
  projected entry (a key change is a removal and an addition);
- a read costs one unit per 4 KB (a missing item or an empty query at least one), half when
  eventually consistent (index queries always are); in a transaction twice that; a query pays for
  every item it reads, those its filter drops included.

Item images before and after each write are read from the emulator directly, writes being
serialised through the proxy so the two images belong to that write.

    python3 cost_proxy.py UPSTREAM_URL PORT

`GET /_cost` answers the counts as JSON; `POST /_cost/reset` clears them.
"""
import http.client
import json
import math
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import boto3

UPSTREAM = urlsplit(sys.argv[1])
PORT = int(sys.argv[2])
ddb = boto3.client(
    "dynamodb",
    endpoint_url=sys.argv[1],
    region_name="us-east-1",
    aws_access_key_id="testing",
    aws_secret_access_key="testing",
)

lock = threading.Lock()
write_lock = threading.Lock()
local = threading.local()
tables = {}


def fresh():
    return {"calls": {}, "rcu": {}, "wcu": {}, "wcu_items": {}, "reads": {}, "queues": {}}


counts = fresh()


def add(kind, key, by=1):
    with lock:
        counts[kind][key] = counts[kind].get(key, 0) + by


# --- item sizes and capacity units -------------------------------------------------------


def number_size(text):
    digits = text.lstrip("-").replace(".", "").lstrip("0") or "0"
    return (len(digits.rstrip("0") or "0") + 1) // 2 + 1


def value_size(v):
    (t, x), = v.items()
    if t == "S":
        return len(x.encode())
    if t == "N":
        return number_size(x)
    if t == "B":
        return len(x) * 3 // 4
    if t in ("BOOL", "NULL"):
        return 1
    if t == "SS":
        return sum(len(s.encode()) for s in x)
    if t == "NS":
        return sum(number_size(s) for s in x)
    if t == "L":
        return 3 + sum(1 + value_size(e) for e in x)
    if t == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(e) for k, e in x.items())
    return 0


def item_size(item, attrs=None):
    if not item:
        return 0
    return sum(len(k.encode()) + value_size(v) for k, v in item.items()
               if attrs is None or k in attrs)


def describe(table):
    if table not in tables:
        t = ddb.describe_table(TableName=table)["Table"]
        keys = [k["AttributeName"] for k in t["KeySchema"]]
        indexes = []
        for ix in t.get("GlobalSecondaryIndexes", []) + t.get("LocalSecondaryIndexes", []):
            ix_keys = [k["AttributeName"] for k in ix["KeySchema"]]
            p = ix["Projection"]
            if p["ProjectionType"] == "ALL":
                projected = None
            else:
                projected = set(keys) | set(ix_keys) | set(p.get("NonKeyAttributes", []))
            indexes.append((ix_keys, projected))
        tables[table] = (keys, indexes)
    return tables[table]


def key_of(table, item):
    keys, _ = describe(table)
    return {k: item[k] for k in keys if k in item}


def image(table, key):
    return ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")


def write_units(table, before, after, factor):
    """Units of one item write: the table's (times `factor` in a transaction) and its indexes'."""
    units = factor * max(1, math.ceil(max(item_size(before), item_size(after)) / 1024))
    _, indexes = describe(table)
    for ix_keys, projected in indexes:
        def entry(item):
            if not item or any(k not in item for k in ix_keys):
                return None
            return {k: v for k, v in item.items() if projected is None or k in projected}
        old, new = entry(before), entry(after)
        size = lambda e: max(1, math.ceil(item_size(e) / 1024))
        if old is None and new is None:
            continue
        if old is None:
            units += size(new)
        elif new is None:
            units += size(old)
        elif any(old[k] != new[k] for k in ix_keys):
            units += size(old) + size(new)
        elif old != new:
            units += max(size(old), size(new))
    return units


def kind_of(key):
    """What an item is, from its sort key: `JOB`, `COUNT`, `URL#`, `RES#`, `PLACE#` ..."""
    sk = key.get("SK", {}).get("S", "")
    return sk.split("#", 1)[0] + ("#" if "#" in sk else "")


def read_units(size, consistent, minimum=1):
    units = max(minimum, math.ceil(size / 4096))
    return units if consistent else units / 2


# --- per-operation accounting ------------------------------------------------------------


def writes_of(op, body):
    """(table, key, factor) of each item a write operation touches."""
    if op in ("PutItem",):
        return [(body["TableName"], key_of(body["TableName"], body["Item"]), 1)]
    if op in ("UpdateItem", "DeleteItem"):
        return [(body["TableName"], body["Key"], 1)]
    if op == "BatchWriteItem":
        out = []
        for table, requests in body["RequestItems"].items():
            for r in requests:
                if "PutRequest" in r:
                    out.append((table, key_of(table, r["PutRequest"]["Item"]), 1))
                else:
                    out.append((table, r["DeleteRequest"]["Key"], 1))
        return out
    if op == "TransactWriteItems":
        out = []
        for entry in body["TransactItems"]:
            (kind, spec), = entry.items()
            key = spec.get("Key") or key_of(spec["TableName"], spec["Item"])
            out.append((spec["TableName"], key, 2))
        return out
    return None


def dynamodb_reads(op, body, reply):
    if op == "GetItem":
        return read_units(item_size(reply.get("Item")), body.get("ConsistentRead", False))
    if op == "BatchGetItem":
        units = 0
        for table, spec in body["RequestItems"].items():
            got = reply.get("Responses", {}).get(table, [])
            missing = len(spec["Keys"]) - len(got)
            consistent = spec.get("ConsistentRead", False)
            units += sum(read_units(item_size(i), consistent) for i in got)
            units += read_units(0, consistent) * missing
        return units
    if op == "TransactGetItems":
        return sum(2 * read_units(item_size(r.get("Item")), True) for r in reply.get("Responses", []))
    if op in ("Query", "Scan"):
        items = reply.get("Items", [])
        size = sum(item_size(i) for i in items)
        scanned = reply.get("ScannedCount", len(items))
        if scanned > len(items):
            size += (scanned - len(items)) * (size / len(items) if items else 200)
        consistent = body.get("ConsistentRead", False) and "IndexName" not in body
        return read_units(size, consistent)
    return 0


def read_of(op, body):
    """What a read asks for: the kind of item it gets, or the index and key condition it
    queries (each of the service's queries has its own)."""
    if op == "GetItem":
        return f"{op} {kind_of(body.get('Key', {}))}"
    if op in ("Query", "Scan"):
        where = body.get("KeyConditionExpression", "")
        return f"{op} {body.get('IndexName', 'table')}: {where}"
    return op


def dynamodb(op, body, forward):
    writes = writes_of(op, body)
    if writes is None:
        status, headers, data = forward()
        if status == 200:
            units = dynamodb_reads(op, body, json.loads(data or b"{}"))
            if units:
                add("rcu", op, units)
            add("reads", read_of(op, body))
        return status, headers, data
    with write_lock:
        before = [image(t, k) for t, k, _ in writes]
        status, headers, data = forward()
        after = [image(t, k) for t, k, _ in writes]
    if status == 200 or b"ConditionalCheckFailed" in data or b"TransactionCanceled" in data:
        for (t, k, f), b, a in zip(writes, before, after):
            units = write_units(t, b, a, f)
            add("wcu", op, units)
            outcome = "" if status == 200 else " (refused)"
            add("wcu_items", f"{op} {kind_of(k)}{outcome}", units)
    return status, headers, data


def s3_operation(method, path, query):
    parts = path.lstrip("/").split("/", 1)
    has_key = len(parts) == 2 and parts[1] != ""
    if method == "GET":
        return "GetObject" if has_key else "ListObjects"
    if method == "HEAD":
        return "HeadObject" if has_key else "HeadBucket"
    if method == "PUT":
        return "PutObject" if has_key else "PutBucket"
    if method == "DELETE":
        return "DeleteObject" if has_key else "DeleteBucket"
    if method == "POST":
        return "DeleteObjects" if "delete" in query else "PostObject"
    return method


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def upstream(self):
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port,
                                                           timeout=60)
        return conn

    def forward(self, body):
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("connection", "keep-alive", "transfer-encoding")}
        headers["Content-Length"] = str(len(body))
        for attempt in range(2):
            conn = self.upstream()
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                r = conn.getresponse()
                return r.status, r.getheaders(), r.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                local.conn = None
                if attempt:
                    raise
        raise RuntimeError("unreachable")

    def answer(self, status, headers, data):
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def handle_any(self):
        global counts
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        if url.path == "/_cost":
            if self.command == "POST":
                with lock:
                    counts = fresh()
            with lock:
                data = json.dumps(counts).encode()
            return self.answer(200, [("Content-Type", "application/json")], data)
        target = self.headers.get("X-Amz-Target", "")
        forward = lambda: self.forward(body)
        if target.startswith("DynamoDB_"):
            op = target.split(".", 1)[1]
            add("calls", f"dynamodb {op}")
            return self.answer(*dynamodb(op, json.loads(body or b"{}"), forward))
        if target.startswith("AmazonSQS."):
            op = target.split(".", 1)[1]
            add("calls", f"sqs {op}")
            if op == "ReceiveMessage":
                queue = json.loads(body or b"{}").get("QueueUrl", "").rsplit("/", 1)[-1]
                add("queues", queue)
            return self.answer(*forward())
        if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded") \
                and b"Action=" in body:
            op = parse_qs(body.decode()).get("Action", ["?"])[0]
            add("calls", f"sqs {op}")
            return self.answer(*forward())
        add("calls", f"s3 {s3_operation(self.command, url.path, parse_qs(url.query, True))}")
        return self.answer(*forward())

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


if __name__ == "__main__":
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", PORT), Proxy).serve_forever()
