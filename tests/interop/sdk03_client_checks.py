#!/usr/bin/env python3
"""Drives an agentry A2A server with the official Python SDK client (a2a-sdk 0.3.x).

    python sdk03_client_checks.py BASE_URL [--token TOKEN] [--binding jsonrpc|rest]

With `--binding rest` the SDK's RestTransport (the v0.3 HTTP+JSON binding under /v1/...)
runs the same checks; its errors are HTTP statuses instead of JSON-RPC codes.

The server must run the `conformance` agent with push notifications to loopback allowed and,
for the extended-card check, an extended card behind TOKEN. Every response is parsed by the
SDK's own pydantic models, so a field the SDK cannot read fails the check. Prints one line per
check and a closing "N passed, M failed"; exits non-zero on any failure.
"""

import argparse
import asyncio
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
from a2a.client import A2ACardResolver
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.types import (
    DeleteTaskPushNotificationConfigResponse,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigResponse,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    Part,
    PushNotificationConfig,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
)

RESULTS: list[tuple[str, bool, str]] = []


class Webhook(BaseHTTPRequestHandler):
    received: list[tuple[dict, dict]] = []

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        Webhook.received.append((dict(self.headers), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


def start_webhook() -> str:
    srv = HTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/hook"


def msg(text: str, mid: str | None = None, task_id=None, context_id=None) -> Message:
    return Message(
        role="user",
        parts=[Part(root=TextPart(text=text))],
        message_id=mid or str(uuid.uuid4()),
        task_id=task_id,
        context_id=context_id,
    )


async def check(name, coro):
    print(f"... {name}", file=sys.stderr, flush=True)
    try:
        await asyncio.wait_for(coro, 60)
        RESULTS.append((name, True, ""))
    except Exception as e:  # noqa: BLE001
        RESULTS.append((name, False, f"{type(e).__name__}: {e}"))


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


# The HTTP status the HTTP+JSON binding answers each JSON-RPC code with.
HTTP_OF = {-32001: 404, -32002: 409, -32004: 400, -32602: 400}


async def expect_rpc_error(coro, code):
    try:
        await coro
    except A2AClientJSONRPCError as e:
        expect(e.error.code == code, f"expected code {code}, got {e.error.code} {e.error.message}")
        return
    except A2AClientHTTPError as e:
        expect(e.status_code == HTTP_OF[code], f"expected HTTP {HTTP_OF[code]} for {code}, got {e.status_code}")
        return
    raise AssertionError(f"expected JSON-RPC error {code}, got success")


async def raw(http, url, method, params):
    r = await http.post(url, json={"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params})
    return r.json()


async def main(base: str, token: str | None, binding: str) -> int:
    hook = start_webhook()
    rest = binding == "rest"
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        if rest:
            iface = next((i for i in card.additional_interfaces or [] if i.transport == "HTTP+JSON"), None)
            if iface is None:
                raw_card = (await http.get(base.rstrip("/") + "/.well-known/agent-card.json")).text
                raise SystemExit(f"the card declares no HTTP+JSON interface: {raw_card}")
            t = RestTransport(http, agent_card=card, url=iface.url.rstrip("/"))
        else:
            t = JsonRpcTransport(http, agent_card=card)

        async def card_check():
            expect(card.name == "conformance", f"card name {card.name}")
            expect(card.capabilities.streaming is True, "streaming capability")
            legacy = (await http.get(base.rstrip("/") + "/.well-known/agent.json")).json()
            expect(legacy["name"] == "conformance", "legacy card path")

        await check("card", card_check())

        state = {}

        async def send(p: MessageSendParams):
            # Over REST the SDK sends `blocking: false` (omitted, proto3) unless told: ask for a
            # blocking send explicitly where the check means one.
            if rest and p.configuration is None:
                p.configuration = MessageSendConfiguration(blocking=True)
            return await t.send_message(p)

        async def send_blocking():
            r = await send(MessageSendParams(message=msg("hello sdk")))
            expect(isinstance(r, Task), f"expected Task, got {type(r).__name__}")
            expect(r.status.state == TaskState.working, f"state {r.status.state}")
            expect(r.artifacts and r.artifacts[0].parts[0].root.text == "hello sdk", "echo artifact")
            state["task"] = r

        await check("message/send blocking -> working (turn over, task open)", send_blocking())

        async def follow_up():
            task = state["task"]
            r = await send(
                MessageSendParams(message=msg("second turn", task_id=task.id, context_id=task.context_id))
            )
            expect(isinstance(r, Task) and r.id == task.id, "same task")
            texts = [p.root.text for m in r.history for p in m.parts]
            expect(texts == ["hello sdk", "echo: hello sdk", "second turn", "echo: second turn"], f"history {texts}")

        await check("multi-turn keeps history", follow_up())

        async def history_length():
            r = await t.get_task(TaskQueryParams(id=state["task"].id, history_length=1))
            expect(len(r.history) == 1 and r.history[0].parts[0].root.text == "echo: second turn", f"history {r.history}")

        await check("tasks/get historyLength", history_length())

        async def complete():
            r = await send(MessageSendParams(message=msg("hi", mid=f"tck-complete-task-{uuid.uuid4().hex[:8]}")))
            expect(isinstance(r, Task) and r.status.state == TaskState.completed, f"{r}")
            expect(r.status.message.parts[0].root.text == "Hello from TCK", "status message")
            await expect_rpc_error(
                send(MessageSendParams(message=msg("more", task_id=r.id, context_id=r.context_id))), -32004
            )
            await expect_rpc_error(t.cancel_task(TaskIdParams(id=r.id)), -32002)

        await check("completed task: no more messages (-32004), not cancelable (-32002)", complete())

        async def direct_message():
            r = await send(MessageSendParams(message=msg("hi", mid="tck-message-response-1")))
            expect(isinstance(r, Message) and r.parts[0].root.text == "Direct message response", f"{r}")

        await check("direct message response", direct_message())

        async def non_blocking():
            r = await send(
                MessageSendParams(
                    message=msg("hi", mid="test-resubscribe-message-id-nb"),
                    configuration=MessageSendConfiguration(blocking=False),
                )
            )
            expect(isinstance(r, Task) and r.status.state in (TaskState.submitted, TaskState.working), f"{r.status}")
            state["long"] = r

        await check("message/send blocking=false returns at once", non_blocking())

        async def resubscribe():
            task = state["long"]
            events = []
            async for ev in t.resubscribe(TaskIdParams(id=task.id)):
                events.append(ev)
                if len(events) == 3:
                    c = await t.cancel_task(TaskIdParams(id=task.id))
                    expect(c.status.state == TaskState.canceled, "canceled")
            expect(isinstance(events[0], Task), f"first event {type(events[0]).__name__}")
            expect(any(isinstance(e, TaskArtifactUpdateEvent) for e in events), "artifact chunks while working")
            last = events[-1]
            expect(isinstance(last, TaskStatusUpdateEvent) and last.final and last.status.state == TaskState.canceled,
                   f"last {last}")

        await check("tasks/resubscribe on a running task, then cancel", resubscribe())

        async def stream():
            kinds = []
            async for ev in t.send_message_streaming(MessageSendParams(message=msg("s", mid="tck-stream-001-x"))):
                kinds.append(ev.kind if not isinstance(ev, TaskStatusUpdateEvent) else f"status:{ev.status.state.value}:{ev.final}")
            expect(kinds == ["task", "status:working:False", "artifact-update", "status:completed:True"], f"{kinds}")

        await check("message/stream event order", stream())

        async def chunked():
            chunks = []
            async for ev in t.send_message_streaming(MessageSendParams(message=msg("s", mid="tck-stream-artifact-chunked-1"))):
                if isinstance(ev, TaskArtifactUpdateEvent):
                    chunks.append((ev.artifact.artifact_id, ev.append, ev.last_chunk))
            expect(len(chunks) == 2 and chunks[0][0] == chunks[1][0], f"{chunks}")
            expect(chunks[1][1] is True and chunks[1][2] is True, f"{chunks}")

        await check("streamed artifact chunks (append, lastChunk)", chunked())

        async def errors():
            await expect_rpc_error(t.get_task(TaskQueryParams(id="no-such-task")), -32001)
            await expect_rpc_error(t.cancel_task(TaskIdParams(id="no-such-task")), -32001)
            got = []
            try:
                async for ev in t.resubscribe(TaskIdParams(id="no-such-task")):
                    got.append(ev)
            except A2AClientJSONRPCError as e:
                expect(e.error.code == -32001, f"code {e.error.code}")
            except A2AClientHTTPError as e:
                # The SDK's SSE reader reports a non-SSE answer (our 404) as its own 400.
                expect(rest and e.status_code in (400, 404), f"HTTP {e.status_code}")
            else:
                raise AssertionError("resubscribe to unknown task succeeded")

        await check("unknown task: -32001 (get, cancel, resubscribe)", errors())

        async def push():
            r = await send(MessageSendParams(message=msg("push me")))
            cfg = TaskPushNotificationConfig(
                task_id=r.id,
                push_notification_config=PushNotificationConfig(id="hook1", url=hook, token="tok-1"),
            )
            s = await t.set_task_callback(cfg)
            expect(s.push_notification_config.url == hook, "set echoes config")
            cfg2 = TaskPushNotificationConfig(
                task_id=r.id, push_notification_config=PushNotificationConfig(id="hook2", url=hook, token="tok-2")
            )
            await t.set_task_callback(cfg2)
            g = await t.get_task_callback(GetTaskPushNotificationConfigParams(id=r.id, push_notification_config_id="hook1"))
            expect(g.push_notification_config.token == "tok-1", "get")
            if rest:
                configs = f"{t.url}/v1/tasks/{r.id}/pushNotificationConfigs"
                lst = (await http.get(configs)).json()
                expect(len(lst["configs"]) == 2, f"list {lst}")
                d = await http.delete(f"{configs}/hook2")
                expect(d.status_code == 200, f"delete {d.status_code}")
                lst = (await http.get(configs)).json()
                expect(len(lst["configs"]) == 1, "one left after delete")
            else:
                lst = ListTaskPushNotificationConfigResponse.model_validate(
                    await raw(http, card.url, "tasks/pushNotificationConfig/list", {"id": r.id})
                )
                expect(len(lst.root.result) == 2, f"list {lst}")
                dele = await raw(
                    http, card.url, "tasks/pushNotificationConfig/delete", {"id": r.id, "pushNotificationConfigId": "hook2"}
                )
                expect("result" in dele and dele["result"] is None, f"delete answer {dele}")
                DeleteTaskPushNotificationConfigResponse.model_validate(dele)
                lst = ListTaskPushNotificationConfigResponse.model_validate(
                    await raw(http, card.url, "tasks/pushNotificationConfig/list", {"id": r.id})
                )
                expect(len(lst.root.result) == 1, "one left after delete")
            Webhook.received.clear()
            await send(MessageSendParams(message=msg("again", task_id=r.id, context_id=r.context_id)))
            for _ in range(50):
                if any(b.get("status", {}).get("state") == "working" for _, b in Webhook.received[1:]):
                    break
                await asyncio.sleep(0.1)
            expect(Webhook.received, "webhook received nothing")
            headers, body = Webhook.received[-1]
            tok = {k.lower(): v for k, v in headers.items()}.get("x-a2a-notification-token")
            expect(tok == "tok-1", f"token header {tok}")
            Task.model_validate(body)
            expect(body["id"] == r.id, "body is the task")

        await check("push configs set/get/list/delete and webhook delivery", push())

        async def push_ssrf():
            r = await raw(http, card.url, "tasks/pushNotificationConfig/set", {
                "taskId": state["task"].id,
                "pushNotificationConfig": {"url": "file:///etc/passwd"},
            })
            expect(r.get("error", {}).get("code") == -32602, f"{r}")

        if not rest:
            await check("push config with a non-http URL refused", push_ssrf())

        async def extended():
            r = await raw(http, card.url, "agent/getAuthenticatedExtendedCard", {})
            if token is None:
                expect(r.get("error", {}).get("code") == -32007, f"{r}")
                return
            expect("error" in r, f"no credentials must fail: {r}")
            ok = await http.post(card.url, headers={"Authorization": f"Bearer {token}"},
                                 json={"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"})
            expect(ok.json()["result"]["name"], f"{ok.text}")

        async def extended_rest():
            r = await http.get(f"{t.url}/v1/card")
            expect(r.status_code == 401, f"no credentials must fail: {r.status_code}")
            authed = RestTransport(
                httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}),
                agent_card=card,
                url=t.url,
            )
            ext = await authed.get_card()
            expect(ext.description.endswith("(extended)"), f"{ext.description}")

        await check("authenticated extended card", extended_rest() if rest else extended())

        async def bad_params():
            r = await raw(http, card.url, "message/send", {"message": {"role": "user", "messageId": "x", "parts": []}})
            expect(r["error"]["code"] == -32602, f"{r}")
            r = await raw(http, card.url, "tasks/get", {"id": state["task"].id, "historyLength": -1})
            expect(r["error"]["code"] == -32602, f"{r}")

        if not rest:
            await check("empty parts and negative historyLength: -32602", bad_params())

    failed = 0
    for name, ok, why in RESULTS:
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {why}"))
        failed += 0 if ok else 1
    print(f"sdk03 client checks ({binding}): {len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--token")
    ap.add_argument("--binding", choices=["jsonrpc", "rest"], default="jsonrpc")
    a = ap.parse_args()
    sys.exit(asyncio.run(main(a.base, a.token, a.binding)))
