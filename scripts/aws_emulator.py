"""The AWS emulator of the tests: the moto server, made to behave as AWS does where the tests
depend on it.

- DynamoDB requests are handled one at a time. DynamoDB applies each request, transactions
  included, atomically; the emulator does not when requests overlap (a transaction whose
  condition fails restores a snapshot of the table, undoing what other requests wrote
  meanwhile). SQS and S3 requests (long polls among them) still run concurrently.
- A transaction's rollback snapshot holds the items it writes, not a deep copy of its whole
  table (which made each transaction cost time in proportion to the table, a second on a
  table of a few thousand items).
- A query of a table or of a local index reads the queried partition only, as DynamoDB does:
  moto sorts every item of the table for each query, which made a job's every query cost time
  in proportion to all the jobs the table ever held.
- IAM is enforced on every request, with the actions and resources AWS checks: a DynamoDB call
  is authorised against its table's ARN (an index's ARN for a query of an index), each item of a
  transaction against its own action (`PutItem`, `UpdateItem`, `DeleteItem`,
  `ConditionCheckItem`), and an SQS batch call against the single message action (`SendMessage`,
  `DeleteMessage`, `ChangeMessageVisibility`).
- The credentials `testing`/`testing` belong to an operator allowed everything (what the
  servers and tests use unless they ask for less); its calls are not checked at all, which
  keeps the emulator fast under the suite's load. `POST /_sarvcrawl/principal` with
  `{"name": ..., "policy": {...}}` creates a user whose only policy is the given document and
  answers its access key, so a test can act with exactly one function's permissions.

Usage: python aws_emulator.py HOST PORT
"""

import copy
import json
import os
import sys
import threading
from collections import defaultdict

from moto import settings
from moto.core.authorization import ActionAuthenticatorMixin
from moto.core.exceptions import JsonRESTError
import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.iam.access_control import IAMRequest
from moto.iam.models import iam_backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.sqs.responses import SQSResponse
from werkzeug.exceptions import HTTPException
from werkzeug.serving import run_simple

ACCOUNT = "123456789012"
OPERATOR_KEY = "testing"

TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}

SQS_BATCH_ACTIONS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


def access_key_of(headers):
    return headers.get("Authorization", "").partition("Credential=")[2].partition("/")[0]


def region_of(headers):
    scope = headers.get("Authorization", "").partition("Credential=")[2].partition(",")[0]
    parts = scope.split("/")
    return parts[2] if len(parts) > 2 else "us-east-1"


def enforce(handler, checks):
    """Checks the request's signature and each (action, resource) against the caller's
    policies, as moto's own check does for one; a refusal is answered in JSON, as DynamoDB and
    SQS (JSON protocol) answer it."""
    if access_key_of(handler.headers) == OPERATOR_KEY:
        # The operator may do everything: its calls skip the (slow) policy evaluation.
        return
    try:
        check_each(handler, checks)
    except HTTPException as e:
        kind = getattr(e, "error_type", None)
        if kind is None:
            raise
        code = "AccessDeniedException" if kind == "AccessDenied" else kind
        answer = JsonRESTError(code, getattr(e, "message", str(e)))
        answer.code = e.code
        raise answer


def check_each(handler, checks):
    path = handler.raw_path
    query = handler.uri.partition("?")[2]
    if query:
        path += "?" + query
    for action, resource in checks:
        request = IAMRequest(
            account_id=handler.current_account,
            method=handler.method,
            path=path,
            data=handler.data,
            body=handler.raw_body,
            headers=handler.headers,
            action=action,
        )
        request.check_signature()
        request.check_action_permitted(resource)


def dynamodb_checks(handler):
    action = handler._get_action()
    try:
        body = json.loads(handler.raw_body or b"{}")
    except ValueError:
        body = {}
    prefix = f"arn:aws:dynamodb:{region_of(handler.headers)}:{handler.current_account}:table/"

    def table(name, index=None):
        arn = prefix + str(name)
        return f"{arn}/index/{index}" if index else arn

    if action == "TransactWriteItems":
        checks = []
        for item in body.get("TransactItems", []):
            for kind, iam_action in TRANSACT_ACTIONS.items():
                if kind in item:
                    checks.append((iam_action, table(item[kind].get("TableName"))))
        return checks
    if action == "TransactGetItems":
        return [("GetItem", table(i["Get"].get("TableName"))) for i in body.get("TransactItems", [])]
    if action in ("BatchGetItem", "BatchWriteItem"):
        return [(action, table(name)) for name in body.get("RequestItems", {})]
    if "TableName" in body:
        return [(action, table(body["TableName"], body.get("IndexName")))]
    return [(action, "*")]


CHECK_ACTION = ActionAuthenticatorMixin._authenticate_and_authorize_action


def presigned_key_of(handler):
    """The access key of a presigned request (its credential is in the query string)."""
    credential = (getattr(handler, "querystring", None) or {}).get("X-Amz-Credential", [""])
    if isinstance(credential, list):
        credential = credential[0] if credential else ""
    return credential.partition("/")[0]


def authorize_unless_operator(self, iam_request_cls, resource="*"):
    """moto's own check (S3 uses it), skipped for the operator, whose presigned URLs (the
    service's uploads) are taken as its own requests. moto reads credentials from the
    Authorization header only: a presigned URL of another principal (a function's link to an
    artifact) is checked against that principal's policies here."""
    signed_by = access_key_of(self.headers)
    key = signed_by or presigned_key_of(self)
    if key == OPERATOR_KEY:
        return
    if signed_by:
        CHECK_ACTION(self, iam_request_cls, resource)
        return
    if key:
        check_presigned(self, iam_request_cls, resource)
        return
    CHECK_ACTION(self, iam_request_cls, resource)


def check_presigned(handler, iam_request_cls, resource):
    """Whether the principal whose credential a presigned URL carries may do what the URL does
    on `resource` (its signature is not checked again: the SDK that presigned it computed it)."""
    credential = handler.querystring.get("X-Amz-Credential", [""])
    credential = credential[0] if isinstance(credential, list) else credential
    headers = dict(handler.headers)
    headers["Authorization"] = f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders=host"
    request = iam_request_cls(
        account_id=handler.current_account,
        method=handler.method,
        path=handler.raw_path,
        data=handler.data,
        body=handler.raw_body,
        headers=headers,
        action=handler._get_action(),
    )
    request.check_action_permitted(resource)


def dynamodb_authorize(self, resource="*"):
    enforce(self, dynamodb_checks(self))


def sqs_authorize(self, resource="*"):
    action = self._get_action()
    enforce(self, [(SQS_BATCH_ACTIONS.get(action, action), self._determine_resource())])


# The operations of the transaction being applied (requests are serialised), by table name.
WRITING = {}


def write_items_in_snapshots(self, transact_items):
    """moto's transaction, whose snapshots (below) copy only what it writes."""
    WRITING.clear()
    for item in transact_items:
        _, op = next(iter(item.items()))
        WRITING.setdefault(op.get("TableName"), []).append(op.get("Key") or op.get("Item") or {})
    try:
        return WRITE_ITEMS(self, transact_items)
    finally:
        WRITING.clear()


WRITE_ITEMS = DynamoDBBackend.transact_write_items


def query_one_partition(self, hash_key, *args, **kwargs):
    """moto's query, given only the queried partition's items when the partition is the
    table's own (the table, or a local index, which shares its partition key), and of those
    only the items within the sort key's condition, as DynamoDB reads them."""
    range_comparison, range_objs = args[0], args[1]
    index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
    if index_name is None:
        sort_key = self.range_key_attr
    else:
        local = [i for i in self.indexes or [] if i.name == index_name]
        if not local:
            return QUERY(self, hash_key, *args, **kwargs)
        ranges = [k["AttributeName"] for k in local[0].schema if k["KeyType"] == "RANGE"]
        sort_key = ranges[0] if len(ranges) == 1 else None
    if hash_key is None or self.range_key_attr is None:
        return QUERY(self, hash_key, *args, **kwargs)
    partition = list(self.items.get(hash_key, {}).values())
    if range_comparison and sort_key and len(kwargs.get("range_key_conditions") or []) <= 1:
        partition = [
            i
            for i in partition
            if i.attrs.get(sort_key) is not None
            and i.attrs[sort_key].compare(range_comparison, range_objs)
        ]
    # Requests are serialised: nothing else reads the table meanwhile.
    self.all_items = lambda: partition
    try:
        return QUERY(self, hash_key, *args, **kwargs)
    finally:
        del self.all_items


QUERY = Table.query


class Snapshots:
    """`copy` as moto's DynamoDB models see it: a table's deep copy (a transaction's rollback
    snapshot) shares the items the transaction does not write."""

    def __getattr__(self, name):
        return getattr(copy, name)

    @staticmethod
    def deepcopy(x, memo=None):
        if not isinstance(x, Table):
            return copy.deepcopy(x, memo)
        snapshot = copy.copy(x)
        ranged = x.range_key_attr is not None
        snapshot.items = defaultdict(dict)
        for h, v in x.items.items():
            snapshot.items[h] = dict(v) if ranged else v
        for key in WRITING.get(x.name, []):
            if x.hash_key_attr not in key:
                continue
            h = DynamoType(key[x.hash_key_attr])
            if not ranged:
                if h in x.items:
                    snapshot.items[h] = copy.deepcopy(x.items[h])
                continue
            if x.range_key_attr not in key:
                continue
            r = DynamoType(key[x.range_key_attr])
            if r in x.items.get(h, {}):
                snapshot.items[h][r] = copy.deepcopy(x.items[h][r])
        return snapshot


def iam():
    return iam_backends[ACCOUNT]["aws"]


def add_principal(name, policy, key_id=None, secret=None):
    backend = iam()
    backend.create_user("us-east-1", name)
    backend.put_user_policy(name, "only", json.dumps(policy))
    key = backend.create_access_key(name)
    if key_id:
        key.access_key_id, key.secret_access_key = key_id, secret
    return key


def add_operator():
    """The operator: `testing`/`testing`, allowed everything."""
    allow_all = {"Effect": "Allow", "Action": "*", "Resource": "*"}
    policy = {"Version": "2012-10-17", "Statement": [allow_all]}
    add_principal("operator", policy, key_id=OPERATOR_KEY, secret=OPERATOR_KEY)


class Emulator:
    """WSGI middleware: the principal endpoint, and one DynamoDB request at a time."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.principals = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") == "/_sarvcrawl/principal":
            return self.principal(environ, start_response)
        if environ.get("PATH_INFO") == "/moto-api/reset":
            # A reset forgets every IAM user: the operator comes back at once.
            answer = list(self.app(environ, start_response))
            with self.principals:
                add_operator()
            return answer
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
            with self.lock:
                # The body is produced inside the lock, so the whole request is serialised.
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)

    def principal(self, environ, start_response):
        size = int(environ.get("CONTENT_LENGTH") or 0)
        request = json.loads(environ["wsgi.input"].read(size) or b"{}")
        with self.principals:
            key = add_principal(request["name"], request["policy"])
        body = json.dumps(
            {"access_key_id": key.access_key_id, "secret_access_key": key.secret_access_key}
        ).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    DynamoHandler._authenticate_and_authorize_normal_action = dynamodb_authorize
    DynamoDBBackend.transact_write_items = write_items_in_snapshots
    Table.query = query_one_partition
    dynamodb_models.copy = Snapshots()
    SQSResponse._authenticate_and_authorize_normal_action = sqs_authorize
    ActionAuthenticatorMixin._authenticate_and_authorize_action = authorize_unless_operator
    add_operator()
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, Emulator(app), threaded=True)


if __name__ == "__main__":
    main()
