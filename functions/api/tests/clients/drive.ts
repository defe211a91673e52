// Drives the TypeScript client that @hey-api/openapi-ts generated from docs/openapi.yaml
// (functions/api/tests/clients.rs generates it into ./client beside this file, compiles both
// with tsc and runs the result with node against the local API). Every request is signed with
// SigV4 in a fetch interceptor (aws4): the document declares `sigv4` as API Gateway does, and
// no generator computes a signature.
//
// Environment: LIFO_API_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and
// FAILED_TASK_ID (a task the test stored as FAILURE, for retry). Prints one line per step; any
// failure throws (node exits non-zero).

import { createClient } from './client/client';
import {
  cancelTask,
  createTasks,
  deleteTask,
  getStats,
  getTask,
  listUserTasks,
  pauseQueue,
  resumeQueue,
  retryTask,
} from './client/sdk.gen';

declare const process: { env: Record<string, string | undefined> };
declare function require(name: string): any;
const aws4 = require('aws4');

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};

const base = env('LIFO_API_URL');
const credentials = {
  accessKeyId: env('AWS_ACCESS_KEY_ID'),
  secretAccessKey: env('AWS_SECRET_ACCESS_KEY'),
};
const region = process.env.AWS_REGION ?? 'us-east-1';

const client = createClient({ baseUrl: base });
// Signs the request as sent: its URL, method and body are final here.
client.interceptors.request.use(async (request: Request) => {
  const url = new URL(request.url);
  const body = request.method === 'GET' || request.method === 'HEAD' ? '' : await request.clone().text();
  const headers: Record<string, string> = {};
  const type = request.headers.get('content-type');
  if (type && body) headers['content-type'] = type;
  const signed = aws4.sign(
    { host: url.host, path: url.pathname + url.search, method: request.method, headers, body, service: 'execute-api', region },
    credentials,
  );
  const out = new Headers(request.headers);
  for (const name of ['Authorization', 'X-Amz-Date']) out.set(name, signed.headers[name]);
  return new Request(request.url, { method: request.method, headers: out, body: body || undefined });
});

function expect(condition: unknown, what: string, got: unknown): void {
  if (!condition) throw new Error(`${what}: ${JSON.stringify(got)}`);
  console.log(`typescript: ${what}`);
}

async function main(): Promise<void> {
  const created = await createTasks({
    client,
    body: {
      tasks: [
        { taskId: 'ts-1', userId: 'ts-user', payload: { orderId: 2001, lines: [{ sku: 'a', n: 2 }] } },
        { taskId: 'ts-2', userId: 'ts-user', payload: { orderId: 2002 }, dueInDays: 3 },
      ],
    },
  });
  expect(created.response.status === 201 && created.data?.created.join() === 'ts-1,ts-2', 'create', created.data);

  const task = await getTask({ client, path: { taskId: 'ts-1' } });
  expect(task.data?.taskId === 'ts-1' && (task.data?.payload as any)?.orderId === 2001, 'get', task.data);

  const page = await listUserTasks({ client, path: { userId: 'ts-user' }, query: { limit: 10 } });
  const ids = (page.data?.items ?? []).map((t) => t.taskId).sort().join();
  expect(ids === 'ts-1,ts-2', 'list', page.data);

  const cancelled = await cancelTask({ client, path: { taskId: 'ts-2' } });
  expect(cancelled.data?.taskStatus === 'CANCELLED', 'cancel', cancelled.data);
  const refused = await cancelTask({ client, path: { taskId: 'ts-1' } });
  expect(refused.response.status === 409 && (refused.error as any)?.type === '/problems/conflict', 'cancel refused', refused.error);

  const failed = env('FAILED_TASK_ID');
  const retried = await retryTask({ client, path: { taskId: failed } });
  expect(retried.data?.done.join() === failed, 'retry', retried.data);

  const deleted = await deleteTask({ client, path: { taskId: 'ts-1' } });
  expect(deleted.data?.done.join() === 'ts-1', 'delete', deleted.data);
  const gone = await getTask({ client, path: { taskId: 'ts-1' } });
  expect(gone.response.status === 404 && (gone.error as any)?.status === 404, 'get deleted', gone.error);

  const paused = await pauseQueue({ client });
  expect(paused.data?.paused === true, 'pause', paused.data);
  const resumed = await resumeQueue({ client });
  expect(resumed.data?.paused === false, 'resume', resumed.data);
  const stats = await getStats({ client, query: { days: 0 } });
  expect(stats.data !== undefined && 'paused' in (stats.data as object), 'stats', stats.data);

  // Unsigned: API Gateway's own 403, its message.
  const unsigned = createClient({ baseUrl: base });
  const forbidden = await getTask({ client: unsigned, path: { taskId: 'ts-2' } });
  expect(forbidden.response.status === 403 && typeof (forbidden.error as any)?.message === 'string', 'unsigned', forbidden.error);
  console.log('typescript: ok');
}

main().catch((e) => {
  console.error(e);
  throw e;
});
