"""Runs the moto server with DynamoDB requests handled one at a time.

DynamoDB applies each request, transactions included, atomically. The emulator does not when
requests overlap: a transaction snapshots the table and, when one of its conditions fails,
restores that snapshot, undoing writes that other requests made meanwhile. Serialising the
DynamoDB requests gives the tests the atomicity the real service has; SQS and S3 requests
(long polls among them) still run concurrently.

Usage: python moto_serial.py HOST PORT
"""

import os
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


class SerialDynamoDB:
    """WSGI middleware: one DynamoDB request at a time."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
            with self.lock:
                # The body is produced inside the lock, so the whole request is serialised.
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, SerialDynamoDB(app), threaded=True)


if __name__ == "__main__":
    main()
