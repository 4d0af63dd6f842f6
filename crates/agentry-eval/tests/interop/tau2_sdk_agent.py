"""An agent under test built on the official A2A Python SDK (a2a-sdk 1.x, protocol 1.0 with
0.3 compatibility): it knows each tau2 task's expected actions (TAU2_TASKS, a tasks.json), is
told the task by the user's first words ("[task:ID]"), makes all the expected calls in one
reply, then says the information to communicate. Replies are Tasks whose answer is an
artifact (the SDK's helloworld pattern).

Env: TAU2_TASKS (path), A2A_PORT (default 9999).
"""

import json
import logging
import os
import re

from a2a.helpers import get_message_text, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.types.a2a_pb2 import TaskState
from starlette.applications import Starlette

PORT = int(os.environ.get('A2A_PORT', '9999'))
TASKS = {t['id']: t for t in json.load(open(os.environ['TAU2_TASKS']))}
STATE = {}  # context id -> [task id, turns]

logging.getLogger('a2a').setLevel(logging.WARNING)


def reply(context_id, text):
    m = re.search(r'\[task:([^\]]+)\]', text)
    if m:
        STATE[context_id] = [m.group(1), 0]
    if context_id not in STATE:
        return 'I do not know which task this is.'
    st = STATE[context_id]
    st[1] += 1
    criteria = TASKS[st[0]].get('evaluation_criteria') or {}
    actions = [a for a in (criteria.get('actions') or []) if a.get('requestor', 'assistant') == 'assistant']
    if st[1] == 1 and actions:
        calls = [{'tool_call': {'name': a['name'], 'arguments': a['arguments']}} for a in actions]
        return 'Let me do that.\n```json\n' + json.dumps({'tool_calls': calls}) + '\n```'
    return 'All done. ' + '. '.join(criteria.get('communicate_info') or [])


class OracleExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if not task:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue=event_queue, task_id=task.id, context_id=task.context_id)
        await updater.update_status(state=TaskState.TASK_STATE_WORKING)
        text = reply(task.context_id, get_message_text(context.message))
        await updater.add_artifact(parts=[new_text_part(text=text, media_type='text/plain')])
        await updater.update_status(state=TaskState.TASK_STATE_COMPLETED)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


card = AgentCard(
    name='tau2 oracle',
    description="Performs each tau2 task's expected actions",
    version='0.0.1',
    default_input_modes=['text/plain'],
    default_output_modes=['text/plain'],
    capabilities=AgentCapabilities(streaming=True),
    supported_interfaces=[
        AgentInterface(protocol_binding='JSONRPC', protocol_version='1.0', url=f'http://127.0.0.1:{PORT}/'),
        AgentInterface(protocol_binding='HTTP+JSON', protocol_version='1.0', url=f'http://127.0.0.1:{PORT}'),
    ],
    skills=[AgentSkill(id='support', name='Support', description='Customer support', tags=['tau2'])],
)

handler = DefaultRequestHandler(agent_executor=OracleExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
routes = []
routes.extend(create_agent_card_routes(card))
routes.extend(create_jsonrpc_routes(handler, '/', enable_v0_3_compat=True))
routes.extend(create_rest_routes(handler, enable_v0_3_compat=True))
app = Starlette(routes=routes)

if __name__ == '__main__':
    import uvicorn

    uvicorn.run(app, host='127.0.0.1', port=PORT, access_log=False, log_level='warning')
