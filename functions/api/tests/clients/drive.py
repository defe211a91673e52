"""Drives the Python client that openapi-python-client generated from docs/openapi.yaml
(functions/api/tests/clients.rs generates it, puts it on PYTHONPATH as `lifo_client` and runs
this against the local API). Every request is signed with SigV4 in the client's httpx `Auth`:
the document declares `sigv4` as API Gateway does, and no generator computes a signature.

Environment: LIFO_API_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, and
FAILED_TASK_ID (a task the test stored as FAILURE, for retry). Prints one line per step; any
failure raises.
"""

import os

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from lifo_client import AuthenticatedClient
from lifo_client.api.default import (
    cancel_task,
    create_tasks,
    delete_task,
    get_stats,
    get_task,
    list_user_tasks,
    pause_queue,
    resume_queue,
    retry_task,
)
from lifo_client.models import (
    Control,
    CreateRequestType0,
    CreateResponse,
    Done,
    GatewayMessage,
    NewTask,
    Payload,
    Problem,
    Task,
)


class SigV4(httpx.Auth):
    """Signs each request as an AWS SDK does, once its URL and body are final."""

    requires_request_body = True

    def __init__(self, credentials, region):
        self.signer = SigV4Auth(credentials, "execute-api", region)

    def auth_flow(self, request):
        signed = AWSRequest(
            method=request.method,
            url=str(request.url),
            data=request.content,
            headers={"content-type": request.headers.get("content-type", "")} if request.content else {},
        )
        self.signer.add_auth(signed)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in signed.headers:
                request.headers[name] = signed.headers[name]
        yield request


def expect(result, kind, what):
    assert isinstance(result, kind), f"{what}: {result!r}"
    print(f"python: {what}: {type(result).__name__}")
    return result


base = os.environ["LIFO_API_URL"]
credentials = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
auth = SigV4(credentials, os.environ.get("AWS_REGION", "us-east-1"))
# The token is never sent: the Auth above writes the Authorization header.
client = AuthenticatedClient(base_url=base, token="sigv4", httpx_args={"auth": auth})

body = CreateRequestType0(
    tasks=[
        NewTask(payload=Payload.from_dict({"orderId": 1001, "lines": [{"sku": "a", "n": 2}]}), task_id="py-1", user_id="py-user"),
        NewTask(payload=Payload.from_dict({"orderId": 1002}), task_id="py-2", user_id="py-user", due_in_days=3),
    ]
)
created = expect(create_tasks.sync(client=client, body=body), CreateResponse, "create")
assert created.created == ["py-1", "py-2"], created

task = expect(get_task.sync("py-1", client=client), Task, "get")
assert task.task_id == "py-1" and task.payload["orderId"] == 1001, task
page = list_user_tasks.sync("py-user", client=client, limit=10)
assert sorted(t.task_id for t in page.items) == ["py-1", "py-2"], page
print("python: list: " + type(page).__name__)

cancelled = expect(cancel_task.sync("py-2", client=client), Task, "cancel")
assert cancelled.task_status.value == "CANCELLED", cancelled
refused = expect(cancel_task.sync("py-1", client=client), Problem, "cancel refused")
assert refused.status == 409, refused

retried = expect(retry_task.sync(os.environ["FAILED_TASK_ID"], client=client), Done, "retry")
assert retried.done == [os.environ["FAILED_TASK_ID"]], retried

deleted = expect(delete_task.sync("py-1", client=client), Done, "delete")
assert deleted.done == ["py-1"], deleted
gone = expect(get_task.sync("py-1", client=client), Problem, "get deleted")
assert gone.status == 404, gone

paused = expect(pause_queue.sync(client=client), Control, "pause")
assert paused.paused is True, paused
resumed = expect(resume_queue.sync(client=client), Control, "resume")
assert resumed.paused is False, resumed
stats = get_stats.sync(client=client, days=0)
assert stats is not None and "paused" in stats.additional_properties, stats
print("python: stats: " + type(stats).__name__)

# Unsigned: API Gateway's own 403, parsed as its message.
unsigned = AuthenticatedClient(base_url=base, token="not-a-signature")
forbidden = expect(get_task.sync("py-2", client=unsigned), GatewayMessage, "unsigned")
assert forbidden.message, forbidden
print("python: ok")
