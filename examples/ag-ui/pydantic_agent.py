"""Pydantic AI agent served over AG-UI: a test peer for agentwire's upstream AG-UI agents.

No LLM: a deterministic `FunctionModel` reacts to the last user message (or to the
tool results that just came back):

  "weather [in <City>]" -> backend tool get_weather(city), then a text answer with its result
  "pick"                -> frontend tool pick_color (must be offered in RunAgentInput.tools);
                           the run ends with the call pending; the next run carries a `tool`
                           message with the result and the model answers "You picked <result>."
  "delete [<path>]"     -> delete_file(path), which requires approval: the run ends with
                           RUN_FINISHED.outcome = interrupt; resume with RunAgentInput.resume
  "think"               -> REASONING_* events, then text
  "slow"                -> ~20 words streamed with 50 ms between deltas (for cancel tests)
  anything else         -> "Hello from Pydantic AI. You said: <text>" in several deltas

Run:  python pydantic_agent.py [port]   (default 8765, host 127.0.0.1, POST /)
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from collections.abc import AsyncIterator

import uvicorn
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route


def _words(text: str) -> list[str]:
    """Split into deltas that concatenate back to `text` (each word keeps its trailing space)."""
    return re.findall(r'\S+\s*', text)


def _user_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return ' '.join(item for item in part.content if isinstance(item, str))


def _answer_tool_results(returns: list[ToolReturnPart]) -> str:
    answers = []
    for ret in returns:
        if ret.tool_name == 'get_weather':
            answers.append(f'The weather is {ret.content}.')
        elif ret.tool_name == 'delete_file':
            if ret.outcome == 'denied':
                answers.append(f'I did not delete the file: {ret.content}')
            else:
                answers.append(f'Done: {ret.content}.')
        else:  # a frontend tool, answered by the client in a `tool` message
            answers.append(f'You picked {ret.content}.')
    return ' '.join(answers)


async def model_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | dict]:
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    # 'interrupted' = a call left unanswered when the user moved on: answer the new prompt instead.
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart) and p.outcome != 'interrupted']
    if returns:
        for word in _words(_answer_tool_results(returns)):
            yield word
        return

    text = ' '.join(_user_text(p) for p in last.parts if isinstance(p, UserPromptPart)).strip()
    lower = text.lower()
    if 'weather' in lower:
        city = m.group(1) if (m := re.search(r'\bin ([A-Z][\w-]*)', text)) else 'Paris'
        yield {0: DeltaToolCall(name='get_weather', json_args=f'{{"city": "{city}"}}')}
    elif 'pick' in lower:
        if not any(t.name == 'pick_color' for t in info.function_tools):
            yield 'The client did not offer a pick_color tool.'
            return
        yield {0: DeltaToolCall(name='pick_color', json_args='{"options": ')}
        yield {0: DeltaToolCall(json_args='["red", "green", "blue"]}')}
    elif 'delete' in lower:
        path = m.group(0) if (m := re.search(r'/\S+', text)) else '/tmp/demo.txt'
        yield {0: DeltaToolCall(name='delete_file', json_args=f'{{"path": "{path}"}}')}
    elif 'think' in lower:
        yield {0: DeltaThinkingPart(content='The user wants me to think. ')}
        yield {0: DeltaThinkingPart(content='I will answer briefly.')}
        for word in _words('Thought about it: 42.'):
            yield word
    elif 'slow' in lower:
        for i in range(1, 21):
            await asyncio.sleep(0.05)
            yield f'word{i} '
    else:
        for word in _words(f'Hello from Pydantic AI. You said: {text}'):
            yield word


agent = Agent(FunctionModel(stream_function=model_stream), output_type=[str, DeferredToolRequests])


@agent.tool_plain
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f'sunny in {city}'


@agent.tool_plain(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs human approval)."""
    return f'deleted {path}'


async def run_agent(request: Request) -> Response:
    # include_usage: RUN_FINISHED.usage is sent (only to clients declaring protocolVersion >= "1.0").
    return await AGUIAdapter.dispatch_request(request, agent=agent, include_usage=True)


async def health(request: Request) -> Response:
    return PlainTextResponse('ok')


app = Starlette(routes=[Route('/', run_agent, methods=['POST']), Route('/health', health)])

if __name__ == '__main__':
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    sock = socket.create_server(('127.0.0.1', port))  # listening before "ready": early connects queue up
    print(f'ready http://127.0.0.1:{sock.getsockname()[1]}/', flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level='warning')).run(sockets=[sock])
