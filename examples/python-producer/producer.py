"""A producer in Python: create tasks on a lifo-queue stack over its HTTP API,
signed with SigV4 by botocore (the caller needs execute-api:Invoke on the API).

    python producer.py --url https://abc123.execute-api.us-east-1.amazonaws.com

--url is the stack's ApiUrl output (`lifo local up --api` prints a local one). Credentials
and region come the usual botocore way (environment, ~/.aws, an instance role). Exits 0
when every task was created (or already existed), 1 with the API's problem document
otherwise.
"""

import argparse
import json
import sys
import urllib.error
import urllib.request

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.session import Session


def call(url, method, path, body=None, region=None):
    """One signed request; (status, JSON answer). Errors are problem documents."""
    session = Session()
    credentials = session.get_credentials()
    if credentials is None:
        raise SystemExit("no AWS credentials found (environment, ~/.aws or a role)")
    region = region or session.get_config_variable("region") or "us-east-1"
    data = None if body is None else json.dumps(body).encode()
    headers = {} if data is None else {"content-type": "application/json"}
    request = AWSRequest(method=method, url=url.rstrip("/") + path, data=data, headers=headers)
    SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    prepared = request.prepare()
    sent = urllib.request.Request(prepared.url, data=data, headers=dict(prepared.headers), method=method)
    try:
        with urllib.request.urlopen(sent, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as problem:
        return problem.code, json.load(problem)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the stack's ApiUrl")
    parser.add_argument("--region", help="the API's region (default: botocore's)")
    args = parser.parse_args()

    # Producer-chosen ids make a retry after a lost answer safe: a replay answers
    # 200 with the ids under "existing" and writes nothing.
    tasks = [
        {"taskId": f"device-42-connect-{n}", "userId": "device-42",
         "payload": {"deviceId": "device-42", "ip": f"203.0.113.{n}", "event": "connect"}}
        for n in range(1, 4)
    ]
    status, answer = call(args.url, "POST", "/tasks", {"tasks": tasks}, args.region)
    if status not in (200, 201):
        print(json.dumps(answer), file=sys.stderr)
        return 1
    print(f"created {len(answer['created'])}, already there {len(answer.get('existing', []))}")

    status, task = call(args.url, "GET", "/tasks/device-42-connect-3", region=args.region)
    if status != 200:
        print(json.dumps(task), file=sys.stderr)
        return 1
    print(f"{task['taskId']} is {task['taskStatus']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
