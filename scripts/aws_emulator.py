"""The AWS emulator of the tests: the moto server, made to behave as AWS does where the tests
depend on it.

- DynamoDB requests are handled one at a time. DynamoDB applies each request, transactions
  included, atomically; the emulator does not when requests overlap (a transaction whose
  condition fails restores a snapshot of the table, undoing what other requests wrote
  meanwhile). SQS and S3 requests (long polls among them) still run concurrently.
- IAM is enforced on every request, with the actions and resources AWS checks: a DynamoDB call
  is authorised against its table's ARN (an index's ARN for a query of an index), each item of a
  transaction against its own action (`PutItem`, `UpdateItem`, `DeleteItem`,
  `ConditionCheckItem`), and an SQS batch call against the single message action (`SendMessage`,
  `DeleteMessage`, `ChangeMessageVisibility`).
- The credentials `testing`/`testing` belong to an operator allowed everything (what the
  servers and tests use unless they ask for less). `POST /_sarvcrawl/principal` with
  `{"name": ..., "policy": {...}}` creates a user whose only policy is the given document and
  answers its access key, so a test can act with exactly one function's permissions.

Usage: python aws_emulator.py HOST PORT
"""

import json
import os
import sys
import threading

from moto import settings
from moto.core.exceptions import JsonRESTError
from moto.dynamodb.responses import DynamoHandler
from moto.iam.access_control import IAMRequest
from moto.iam.models import iam_backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.sqs.responses import SQSResponse
from werkzeug.exceptions import HTTPException
from werkzeug.serving import run_simple

ACCOUNT = "123456789012"

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


def region_of(headers):
    scope = headers.get("Authorization", "").partition("Credential=")[2].partition(",")[0]
    parts = scope.split("/")
    return parts[2] if len(parts) > 2 else "us-east-1"


def enforce(handler, checks):
    """Checks the request's signature and each (action, resource) against the caller's
    policies, as moto's own check does for one; a refusal is answered in JSON, as DynamoDB and
    SQS (JSON protocol) answer it."""
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


def dynamodb_authorize(self, resource="*"):
    enforce(self, dynamodb_checks(self))


def sqs_authorize(self, resource="*"):
    action = self._get_action()
    enforce(self, [(SQS_BATCH_ACTIONS.get(action, action), self._determine_resource())])


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
    add_principal("operator", policy, key_id="testing", secret="testing")


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
    SQSResponse._authenticate_and_authorize_normal_action = sqs_authorize
    add_operator()
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, Emulator(app), threaded=True)


if __name__ == "__main__":
    main()
