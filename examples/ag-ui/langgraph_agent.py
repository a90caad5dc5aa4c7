"""LangGraph graph served over AG-UI by ag-ui-langgraph: a test peer for agentwire's upstream AG-UI agents.

No LLM: `ScriptedChatModel` (a small langchain-core BaseChatModel) answers deterministically
from the conversation, streaming its text word by word:

  "weather [in <City>]" -> tool call get_weather(city), run by a ToolNode, then a text answer
  "pick"                -> frontend tool pick_color (must be offered in RunAgentInput.tools);
                           the graph ends with the call pending; the next run brings a `tool`
                           message and the model answers "You picked <result>."
  "approve" / "book"    -> a `confirm` node calls langgraph.types.interrupt({...}); the run ends
                           interrupted; the resume payload becomes the node's answer and the
                           final text says "Booking confirmed. Your answer: <answer>"
  "think"               -> a LangChain "reasoning" content block (REASONING_* events), then text
  "slow"                -> ~20 words with 50 ms between chunks (for cancel tests)
  anything else         -> "Hello from LangGraph. You said: <text>"

State is kept per threadId in a MemorySaver checkpointer.
Two routes on the same port, differing only in how an interrupt is surfaced:
  POST /         ag-ui-langgraph defaults: CUSTOM "on_interrupt" event + plain RUN_FINISHED
  POST /outcome  emit_interrupt_outcome=True: the same CUSTOM event + RUN_FINISHED.outcome=interrupt

Run:  python langgraph_agent.py [port]   (default 8766, host 127.0.0.1)
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import uuid
from typing import Any

import uvicorn
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f'sunny in {city}'


class ScriptedChatModel(BaseChatModel):
    tool_names: list[str] = []

    @property
    def _llm_type(self) -> str:
        return 'scripted-fake'

    def bind_tools(self, tools: list, **kwargs: Any) -> 'ScriptedChatModel':
        return self.model_copy(update={'tool_names': [t['name'] if isinstance(t, dict) else t.name for t in tools]})

    def _reply(self, messages: list) -> tuple[str, dict | None, str | None]:
        """(text, tool_call, reasoning) decided from the last message."""
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return (f'The weather is {last.content}.' if last.name == 'get_weather' else f'You picked {last.content}.'), None, None
        if isinstance(last, SystemMessage) and last.content.startswith('booking answer: '):
            answer = last.content.removeprefix('booking answer: ')
            verdict = 'cancelled' if re.match(r'no|cancel', answer, re.I) else 'confirmed'
            return f'Booking {verdict}. Your answer: {answer}', None, None
        text = last.content if isinstance(last.content, str) else ' '.join(
            p.get('text', '') for p in last.content if isinstance(p, dict))
        lower, call_id = text.lower(), f'call_{uuid.uuid4().hex[:12]}'
        if 'weather' in lower:
            city = m.group(1) if (m := re.search(r'\bin ([A-Z][\w-]*)', text)) else 'Paris'
            return '', {'name': 'get_weather', 'args': {'city': city}, 'id': call_id}, None
        if 'pick' in lower and 'pick_color' in self.tool_names:
            return '', {'name': 'pick_color', 'args': {'options': ['red', 'green', 'blue']}, 'id': call_id}, None
        if 'think' in lower:
            return 'Thought about it: 42.', None, 'The user wants me to think. I will answer briefly.'
        if 'slow' in lower:
            return ' '.join(f'word{i}' for i in range(1, 21)), None, None
        return f'Hello from LangGraph. You said: {text}', None, None

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        text, call, _ = self._reply(messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text, tool_calls=[call] if call else []))])

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        text, call, reasoning = self._reply(messages)
        usage = {'input_tokens': 10 * len(messages), 'output_tokens': len(text.split()) or 1}
        usage['total_tokens'] = usage['input_tokens'] + usage['output_tokens']
        if reasoning:  # LangChain standard reasoning block -> REASONING_* events
            for piece in re.findall(r'\S+\s*', reasoning):
                yield ChatGenerationChunk(message=AIMessageChunk(content=[{'type': 'reasoning', 'reasoning': piece, 'index': 0}]))
        if call:
            # Like real providers: name+id first with empty args (ag-ui-langgraph drops args of that
            # first chunk), then the JSON args in two pieces.
            args = json.dumps(call['args'])
            for i, piece in enumerate(['', args[:len(args) // 2], args[len(args) // 2:]]):
                yield ChatGenerationChunk(message=AIMessageChunk(content='', tool_call_chunks=[tool_call_chunk(
                    name=None if i else call['name'], args=piece, id=None if i else call['id'], index=0)],
                    usage_metadata=usage if i == 2 else None))
            return
        words = re.findall(r'\S+\s*', text)
        for i, word in enumerate(words):
            if text.startswith('word1 '):
                await asyncio.sleep(0.05)
            content = [{'type': 'text', 'text': word, 'index': 1}] if reasoning else word  # blocks after reasoning
            yield ChatGenerationChunk(message=AIMessageChunk(content=content, usage_metadata=usage if i == len(words) - 1 else None))


class State(MessagesState):
    tools: list  # frontend tools from RunAgentInput.tools, put here by ag-ui-langgraph
    booking_answer: str | None


model = ScriptedChatModel()


async def chat(state: State) -> dict:
    messages = list(state['messages'])
    if state.get('booking_answer'):
        messages.append(SystemMessage(content=f'booking answer: {state["booking_answer"]}'))
    bound = model.bind_tools([get_weather, *state.get('tools', [])])
    return {'messages': [await bound.ainvoke(messages)], 'booking_answer': None}


def confirm(state: State) -> dict:
    answer = interrupt({'message': 'Book a table for 2 at 19:00?', 'options': ['yes', 'no']})
    if isinstance(answer, dict) and answer.get('__agui_cancelled__'):
        answer = 'cancelled (resume status "cancelled")'
    return {'booking_answer': answer if isinstance(answer, str) else json.dumps(answer)}


def route_start(state: State) -> str:
    if not state['messages']:  # e.g. a `resume` sent to a thread that is not interrupted
        return END
    last = state['messages'][-1]
    wants_booking = isinstance(last, HumanMessage) and re.search(r'approve|book', str(last.content), re.I)
    return 'confirm' if wants_booking else 'chat'


def route_chat(state: State) -> str:
    calls = state['messages'][-1].tool_calls
    return 'tools' if calls and all(c['name'] == 'get_weather' for c in calls) else END  # frontend calls stay pending


builder = StateGraph(State)
builder.add_node('chat', chat)
builder.add_node('confirm', confirm)
builder.add_node('tools', ToolNode([get_weather]))
builder.add_conditional_edges(START, route_start, ['confirm', 'chat', END])
builder.add_edge('confirm', 'chat')
builder.add_conditional_edges('chat', route_chat, ['tools', END])
builder.add_edge('tools', 'chat')
graph = builder.compile(checkpointer=MemorySaver())

app = FastAPI()
add_langgraph_fastapi_endpoint(app, LangGraphAgent(name='demo', graph=graph), '/')
add_langgraph_fastapi_endpoint(app, LangGraphAgent(name='demo', graph=graph, emit_interrupt_outcome=True), '/outcome')

if __name__ == '__main__':
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8766
    sock = socket.create_server(('127.0.0.1', port))  # listening before "ready": early connects queue up
    print(f'ready http://127.0.0.1:{sock.getsockname()[1]}/', flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level='warning')).run(sockets=[sock])
