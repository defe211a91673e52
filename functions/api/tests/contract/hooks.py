"""schemathesis hooks of the contract run (functions/api/tests/contract.rs).

1. Every request is signed with SigV4 for execute-api, as an SDK signs it. requests runs an
   `auth` object once the URL (with its query) and the body are final, so the signature covers
   exactly what is sent. Credentials and region come from the environment (the local stack's).
2. Two rules of docs/openapi.yaml that no JSON Schema can say, and which its descriptions state,
   hold in the data schemathesis calls valid: a task's dueDate is from today to 365 days ahead
   (UTC), and the taskIds of one request differ. A valid case that breaks them is brought within
   them (the date) or dropped (the ids); invalid cases are left as they are.
   The create tests (`crates/lifo-ops/src/create/tests.rs`) check that the server refuses both.
3. A valid create's demo `count` is brought down to at most 25. The contract is the same at
   1,000 (create's tests check the bounds), but nothing claims what the run
   creates, and thousand-task creates left tens of thousands of claimable tasks for every
   `GET /queue` to count on DynamoDB Local: seed 2027 took 671 s, against 83 s for seed 7.
"""

import datetime
import os
from urllib.parse import quote, unquote_to_bytes, urlsplit, urlunsplit

import requests
import schemathesis
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


class SigV4(requests.auth.AuthBase):
    def __init__(self, credentials, region):
        self.signer = SigV4Auth(credentials, "execute-api", region)

    def __call__(self, r):
        # requests writes a space in the query as '+'; SigV4 encodes it as %20 (RFC 3986).
        parts = urlsplit(r.url)
        if parts.query:
            query = "&".join(
                "=".join(quote(unquote_to_bytes(p.replace("+", " ")), safe="-_.~") for p in pair.split("=", 1))
                for pair in parts.query.split("&")
            )
            r.url = urlunsplit(parts._replace(query=query))
        body = r.body if r.body is not None else b""
        if isinstance(body, str):
            body = body.encode("utf-8")
            r.body = body
        signed = AWSRequest(method=r.method, url=r.url, data=body)
        self.signer.add_auth(signed)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in signed.headers:
                r.headers[name] = signed.headers[name]
        return r


schemathesis.auth.set_from_requests(
    SigV4(
        Credentials(
            os.environ["AWS_ACCESS_KEY_ID"],
            os.environ["AWS_SECRET_ACCESS_KEY"],
            os.environ.get("AWS_SESSION_TOKEN"),
        ),
        os.environ.get("AWS_REGION", "us-east-1"),
    )
)


def _valid_create(ctx, case):
    meta = case.meta
    return (
        ctx.operation is not None
        and ctx.operation.label == "POST /tasks"
        and meta is not None
        and meta.generation.mode.name == "POSITIVE"
        and isinstance(case.body, dict)
        and isinstance(case.body.get("tasks"), list)
    )


@schemathesis.hook
def filter_case(ctx, case):
    if not _valid_create(ctx, case):
        return True
    ids = [t.get("taskId") for t in case.body["tasks"] if isinstance(t, dict) and "taskId" in t]
    return len(ids) == len(set(ids))


@schemathesis.hook
def map_case(ctx, case):
    if (
        ctx.operation is not None
        and ctx.operation.label == "POST /tasks"
        and case.meta is not None
        and case.meta.generation.mode.name == "POSITIVE"
        and isinstance(case.body, dict)
        and isinstance(case.body.get("count"), int)
        and not isinstance(case.body.get("count"), bool)
        and case.body["count"] > 25
    ):
        case.body["count"] = 1 + case.body["count"] % 25
    if not _valid_create(ctx, case):
        return case
    today = datetime.datetime.now(datetime.timezone.utc).date()
    for task in case.body["tasks"]:
        if isinstance(task, dict) and isinstance(task.get("dueDate"), str):
            try:
                day = datetime.date.fromisoformat(task["dueDate"])
            except ValueError:
                continue
            task["dueDate"] = (today + datetime.timedelta(days=day.toordinal() % 366)).isoformat()
    return case
