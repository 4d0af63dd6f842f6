// Drives an agentry A2A server with the official JS SDK client, @a2a-js/sdk 1.x (protocol 1.0).
//
//   node js1_client_checks.mjs BASE_URL [TOKEN] [JSONRPC|HTTP+JSON]
//
// The server must run the `conformance` agent (see sdk1_client_checks.py). The SDK's own
// ClientFactory reads the card and picks the transport; its own decoders read every answer.
// Prints one line per check and "N passed, M failed"; exits non-zero on any failure.
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver } from '@a2a-js/sdk/client';
import { TaskNotFoundError, TaskNotCancelableError, UnsupportedOperationError } from '@a2a-js/sdk/errors';

const [base, token, binding = 'JSONRPC'] = process.argv.slice(2);
const results = [];

const expect = (cond, what) => {
  if (!cond) throw new Error(what);
};
async function check(name, fn) {
  console.error(`... ${name}`);
  try {
    await Promise.race([fn(), new Promise((_, rej) => setTimeout(() => rej(new Error('timeout')), 60000))]);
    results.push([name, true, '']);
  } catch (e) {
    results.push([name, false, `${e?.constructor?.name}: ${e?.message}`]);
  }
}
async function expectError(p, cls) {
  try {
    await p;
  } catch (e) {
    expect(e instanceof cls, `expected ${cls.name}, got ${e?.constructor?.name}: ${e?.message}`);
    return;
  }
  throw new Error(`expected ${cls.name}, got success`);
}
const textPart = (t) => ({ content: { $case: 'text', value: t }, metadata: undefined, filename: '', mediaType: '' });
const msg = (text, { mid, taskId = '', contextId = '' } = {}) => ({
  messageId: mid ?? randomUUID(), contextId, taskId, role: Role.ROLE_USER,
  parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [],
});
const send = (message, configuration) => ({ tenant: '', message, configuration, metadata: undefined });
const isTask = (r) => r && 'status' in r;

const factory = () =>
  new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] }));
const client = await factory().createFromUrl(base);

await check(`card read by the JS resolver; factory picks ${binding} 1.0`, async () => {
  const card = await new DefaultAgentCardResolver().resolve(base);
  expect(card.name === 'conformance', `card name ${card.name}`);
  expect(card.capabilities.extendedAgentCard === true, 'extendedAgentCard capability');
  expect(client.protocolVersion.startsWith('1.'), `protocol ${client.protocolVersion}`);
  expect(client.transport.protocolName === binding, `transport ${client.transport.protocolName}`);
});

const state = {};
await check('sendMessage blocking -> working (turn over, task open)', async () => {
  const r = await client.sendMessage(send(msg('hello js')));
  expect(isTask(r), `expected a task, got ${JSON.stringify(r)}`);
  expect(r.status.state === TaskState.TASK_STATE_WORKING, `state ${r.status.state}`);
  expect(r.artifacts[0].parts[0].content.value === 'hello js', 'echo artifact');
  state.task = r;
});

await check('multi-turn keeps history; getTask historyLength', async () => {
  const t = state.task;
  const r = await client.sendMessage(send(msg('second', { taskId: t.id, contextId: t.contextId })));
  const texts = r.history.flatMap((m) => m.parts.map((p) => p.content.value));
  expect(JSON.stringify(texts) === JSON.stringify(['hello js', 'echo: hello js', 'second', 'echo: second']), `history ${texts}`);
  const g = await client.getTask({ tenant: '', id: t.id, historyLength: 1 });
  expect(g.history.length === 1 && g.history[0].role === Role.ROLE_AGENT, `history ${JSON.stringify(g.history)}`);
});

await check('completed task: no more messages, not cancelable', async () => {
  const r = await client.sendMessage(send(msg('hi', { mid: `tck-complete-task-${randomUUID().slice(0, 8)}` })));
  expect(r.status.state === TaskState.TASK_STATE_COMPLETED, `state ${r.status.state}`);
  expect(r.status.message.parts[0].content.value === 'Hello from TCK', 'status message');
  await expectError(client.sendMessage(send(msg('more', { taskId: r.id, contextId: r.contextId }))), UnsupportedOperationError);
  await expectError(client.cancelTask({ tenant: '', id: r.id, metadata: undefined }), TaskNotCancelableError);
});

await check('raw, url and data parts', async () => {
  let r = await client.sendMessage(send(msg('f', { mid: 'tck-artifact-file-1' })));
  let p = r.artifacts[0].parts[0];
  expect(p.content.$case === 'raw' && Buffer.from(p.content.value).toString() === 'tck', `raw ${JSON.stringify(p)}`);
  expect(p.filename === 'output.txt' && p.mediaType === 'text/plain', `${JSON.stringify(p)}`);
  r = await client.sendMessage(send(msg('d', { mid: 'tck-artifact-data-1' })));
  p = r.artifacts[0].parts[0];
  expect(p.content.$case === 'data' && p.content.value.count === 42, `data ${JSON.stringify(p)}`);
});

await check('direct message response', async () => {
  const r = await client.sendMessage(send(msg('hi', { mid: 'tck-message-response-1' })));
  expect(!isTask(r) && r.parts[0].content.value === 'Direct message response', JSON.stringify(r));
});

await check('sendMessageStream event order', async () => {
  const kinds = [];
  for await (const ev of client.sendMessageStream(send(msg('s', { mid: 'tck-stream-001-js' })))) {
    const c = ev.payload.$case;
    kinds.push(c === 'statusUpdate' ? `${c}:${TaskState[ev.payload.value.status.state]}` : c);
  }
  const want = ['task', 'statusUpdate:TASK_STATE_WORKING', 'artifactUpdate', 'statusUpdate:TASK_STATE_COMPLETED'];
  expect(JSON.stringify(kinds) === JSON.stringify(want), `${kinds}`);
});

await check('returnImmediately, resubscribeTask, cancelTask', async () => {
  const r = await client.sendMessage(send(msg('hi', { mid: 'test-resubscribe-message-id-js' }), {
    acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true,
  }));
  expect(isTask(r) && r.status.state !== TaskState.TASK_STATE_COMPLETED, `returnImmediately ${JSON.stringify(r.status)}`);
  const events = [];
  for await (const ev of client.resubscribeTask({ tenant: '', id: r.id })) {
    events.push(ev);
    if (events.length === 3) {
      const c = await client.cancelTask({ tenant: '', id: r.id, metadata: undefined });
      expect(c.status.state === TaskState.TASK_STATE_CANCELED, 'canceled');
    }
  }
  expect(events[0].payload.$case === 'task', `first ${events[0].payload.$case}`);
  const last = events[events.length - 1].payload;
  expect(last.$case === 'statusUpdate' && last.value.status.state === TaskState.TASK_STATE_CANCELED, `last ${JSON.stringify(last)}`);
});

await check('unknown task: TaskNotFoundError', async () => {
  await expectError(client.getTask({ tenant: '', id: 'no-such-task' }), TaskNotFoundError);
});

await check('listTasks by context with pages', async () => {
  const contextId = randomUUID();
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await client.sendMessage(send(msg(`list ${i}`, { contextId })))).id);
  const page = await client.listTasks({ tenant: '', contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 2, pageToken: '' });
  expect(JSON.stringify(page.tasks.map((t) => t.id)) === JSON.stringify(ids.slice().reverse().slice(0, 2)), 'first page');
  expect(page.totalSize === 3 && page.nextPageToken, `${page.totalSize} ${page.nextPageToken}`);
  const rest = await client.listTasks({ tenant: '', contextId, pageSize: 2, pageToken: page.nextPageToken });
  expect(rest.tasks.length === 1 && rest.tasks[0].id === ids[0] && !rest.nextPageToken, 'second page');
});

await check('push configs create/get/list/delete', async () => {
  const t = await client.sendMessage(send(msg('push me')));
  const hook = 'http://127.0.0.1:9/hook';
  const c = await client.createTaskPushNotificationConfig({ tenant: '', id: 'h1', taskId: t.id, url: hook, token: 'tok', authentication: undefined });
  expect(c.url === hook && c.id === 'h1', JSON.stringify(c));
  const g = await client.getTaskPushNotificationConfig({ tenant: '', taskId: t.id, id: 'h1' });
  expect(g.token === 'tok', JSON.stringify(g));
  const l = await client.listTaskPushNotificationConfig({ tenant: '', taskId: t.id, pageSize: 0, pageToken: '' });
  expect(l.configs.length === 1, JSON.stringify(l));
  await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: t.id, id: 'h1' });
  const l2 = await client.listTaskPushNotificationConfig({ tenant: '', taskId: t.id, pageSize: 0, pageToken: '' });
  expect(l2.configs.length === 0, JSON.stringify(l2));
});

if (token) {
  await check('extended card with credentials', async () => {
    const authed = await factory().createFromUrl(base);
    const card = await authed.getAgentCard({ serviceParameters: { Authorization: `Bearer ${token}` } });
    expect(card.name, JSON.stringify(card));
  });
}

let failed = 0;
for (const [name, ok, why] of results) {
  console.log(`${ok ? 'PASS' : 'FAIL'} ${name}${ok ? '' : `: ${why}`}`);
  if (!ok) failed++;
}
console.log(`js1 client checks (${binding}): ${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
