"""A worker Lambda for the LIFO queue, in Python: makes a thumbnail per task.

process invokes it once per task (RunnerKind=lambda), synchronously, with
events/worker-request.json's shape:

    {"taskId": "...", "attempt": 1, "payload": {...},
     "taskCreated": <epoch ms>, "expiresAt": <epoch s>, "userId": "..."}

What it answers decides the task's outcome:

- return anything                     -> SUCCESS
- return {"outcome": "retry-later"}   -> put back, the attempt given back
  (optional "reason", "retryAfterSeconds")
- raise                               -> a failed run: "ErrorType: message"
  in the task's lastError; retried after RetryBackoffSeconds until
  MaxAttempts, then FAILURE.

Delivery is at least once: a task may run again after a crash, so the work
is keyed by taskId (here the thumbnail's name) and safe to repeat.
"""

import hashlib
import time


def handler(event, context):
    task_id = event["taskId"]
    payload = event["payload"]
    image_url = payload.get("imageUrl")
    if not image_url:
        raise ValueError(f"task {task_id}: payload has no imageUrl")
    # The image service said it is over quota until then: come back later
    # (this costs no attempt).
    busy_until_ms = payload.get("busyUntilMs", 0)
    now_ms = time.time() * 1000
    if busy_until_ms > now_ms:
        return {
            "outcome": "retry-later",
            "reason": "image service over quota",
            "retryAfterSeconds": (busy_until_ms - now_ms) / 1000,
        }
    digest = hashlib.sha256(f"{task_id}:{image_url}".encode()).hexdigest()[:16]
    return {"thumbnail": f"s3://thumbnails/{digest}.jpg", "attempt": event["attempt"]}
