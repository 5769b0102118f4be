"""Verifies webhook deliveries with the reference Standard Webhooks library.

Reads {"secret": "whsec_...", "deliveries": [{"headers": {...}, "body": "..."}]} on stdin and
prints one line of JSON: for each delivery, whether it verifies as received and whether it
verifies with one byte of its body altered (it must not).
"""

import json
import sys

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def verifies(wh: Webhook, body: str, headers: dict) -> bool:
    try:
        wh.verify(body, headers)
        return True
    except WebhookVerificationError:
        return False


def main() -> None:
    given = json.load(sys.stdin)
    wh = Webhook(given["secret"])
    out = []
    for d in given["deliveries"]:
        body, headers = d["body"], d["headers"]
        altered = body[:-1] + ("]" if body[-1:] != "]" else "}")
        out.append({"ok": verifies(wh, body, headers), "altered": verifies(wh, altered, headers)})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
