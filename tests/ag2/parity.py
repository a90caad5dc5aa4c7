"""Runs each group-chat scenario of scenarios.json in AG2 itself, so
tests/it/ag2_parity.rs can run the same scenarios in agentwire and compare.

Members are AG2 agents with a custom reply function (no model): the first
rule whose `prefix` the last message starts with (with more after it, as
agentwire's scripted model reads a prefix) answers, with text or with a
call of a handoff tool. `auto` selection, and `manual` with no choice, ask
a selector model: this script serves it, as an OpenAI-compatible server
answering by the scenario's `selector` rules (the scenario is the request's
`model`), for AG2 and for agentwire alike.

Prints two lines on stdout: `{"selector_url": ...}`, then the results by
scenario (`{"speakers": [...], "end": "completed" | "max_rounds"}`; a
`random` scenario's is a list, one per seed 0..23). It then serves the
selector until stdin closes.
"""

import contextlib
import json
import logging
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from autogen import Agent, ConversableAgent, GroupChat, GroupChatManager
from autogen.agentchat import initiate_group_chat
from autogen.agentchat.group import (
    AgentTarget,
    ContextExpression,
    ContextVariables,
    ExpressionAvailableCondition,
    ExpressionContextCondition,
    OnCondition,
    OnContextCondition,
    RevertToUserTarget,
    StayTarget,
    StringLLMCondition,
    TerminateTarget,
)
from autogen.agentchat.group.patterns import DefaultPattern
from autogen.agentchat.group.targets.group_manager_target import GroupManagerTarget
from autogen.io import IOStream
from autogen.io.console import IOConsole

# AG2 logs its warnings (a model it has no price for) to stdout.
logging.disable(logging.WARNING)

SCENARIOS = json.loads(Path(__file__).with_name("scenarios.json").read_text())
BY_NAME = {s["name"]: s for s in SCENARIOS}
# What the user agent says when the conversation comes back to it: the
# conversation ends there, as an agentwire run does.
TO_USER = "<back to the user>"
SEEDS = 24


def match(rules, text):
    """The first rule that takes `text`, as agentwire's scripted model reads
    its rules: `exact`, or `prefix` with more after it, or neither."""
    for rule in rules:
        if "exact" in rule:
            if text == rule["exact"]:
                return rule
            continue
        prefix = rule.get("prefix")
        if prefix is None or (text.startswith(prefix) and text[len(prefix):].strip()):
            return rule
    return None


def last_said(messages):
    """The conversation's last message in a selector's request (AG2's or
    agentwire's), without the selection instructions around it."""
    for m in reversed(messages):
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str) or m.get("role") in ("system", "assistant"):
            continue
        if m.get("name") in ("checking_agent", "speaker_selection_agent"):
            continue
        if content.startswith(("Read the above conversation", "You did")):
            continue
        name = m.get("name")
        if name and content.startswith(name + ": "):
            content = content[len(name) + 2:]
        return content
    return ""


class Selector(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        scenario = BY_NAME.get(body.get("model"), {})
        rule = match(scenario.get("selector", []), last_said(body.get("messages", [])))
        answer = rule["reply"] if rule else "nobody"
        base = {"id": "chatcmpl-parity", "created": 0, "model": body.get("model")}
        if body.get("stream"):
            chunks = [
                {**base, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": answer}, "finish_reason": None}]},
                {**base, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {**base, "object": "chat.completion.chunk", "choices": [],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
            ]
            data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            self.reply("text/event-stream", data.encode())
        else:
            out = {**base, "object": "chat.completion",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                                "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
            self.reply("application/json", json.dumps(out).encode())

    def reply(self, content_type, data):
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class Answers(IOConsole):
    """AG2's console, silent, answering `manual` selection from a list."""

    def __init__(self, answers):
        self.answers = list(answers)

    def print(self, *objects, sep=" ", end="\n", flush=False):
        pass

    def send(self, message):
        pass

    def input(self, prompt="", *, password=False):
        return self.answers.pop(0) if self.answers else ""


def llm(scenario, url):
    return {"config_list": [{"model": scenario["name"], "api_key": "unused", "base_url": url}], "cache_seed": None}


def member(spec, llm_config):
    agent = ConversableAgent(
        name=spec["name"], description=spec["name"], llm_config=llm_config,
        human_input_mode="NEVER", code_execution_config=False,
    )
    calls = iter(range(1, 1000))

    def reply(recipient, messages=None, sender=None, config=None):
        text = (messages or [{}])[-1].get("content") or ""
        rule = match(spec["rules"], text if isinstance(text, str) else "")
        if rule is None:
            return True, ""
        if "call" in rule:
            call = {"id": f"call_{next(calls)}", "type": "function",
                    "function": {"name": rule["call"], "arguments": "{}"}}
            return True, {"role": "assistant", "content": None, "tool_calls": [call]}
        return True, rule["reply"]

    agent.register_reply([Agent, None], reply)
    return agent


def ended(scenario, history):
    last = (history[-1].get("content") or "") if history else ""
    marker = scenario.get("termination")
    if last == TO_USER or (marker and marker in last):
        return "completed"
    return "max_rounds" if len(history) >= scenario["max_rounds"] else "completed"


def classic(scenario, url):
    members = [member(m, False) for m in scenario["members"]]
    by_name = {a.name: a for a in members}
    graph = scenario.get("transitions")
    chat = GroupChat(
        agents=members, messages=[], max_round=scenario["max_rounds"],
        speaker_selection_method=scenario["method"],
        allowed_or_disallowed_speaker_transitions=(
            {by_name[k]: [by_name[v] for v in vs] for k, vs in graph.items()} if graph else None),
        speaker_transitions_type="allowed" if graph else None,
    )
    marker = scenario.get("termination")
    manager = GroupChatManager(
        groupchat=chat, llm_config=llm(scenario, url) if "selector" in scenario else False,
        is_termination_msg=lambda m: bool(marker) and marker in (m.get("content") or ""),
    )
    user = ConversableAgent(name="user", llm_config=False, human_input_mode="NEVER", code_execution_config=False)
    user.initiate_chat(manager, message=scenario["message"], silent=True)
    return {"speakers": [m["name"] for m in chat.messages[1:]], "end": ended(scenario, chat.messages)}


def target(to, by_name):
    return {"user": RevertToUserTarget, "terminate": TerminateTarget, "stay": StayTarget,
            "select": GroupManagerTarget}.get(to, lambda: AgentTarget(by_name[to]))()


def pattern(scenario, url):
    conditions = scenario.get("conditions", {})
    members = [member(m, llm(scenario, url) if m["name"] in conditions else False) for m in scenario["members"]]
    by_name = {a.name: a for a in members}
    for name, list_ in conditions.items():
        by_name[name].handoffs.add_llm_conditions([
            OnCondition(target=target(c["to"], by_name), condition=StringLLMCondition(c["condition"]))
            for c in list_])
    for name, list_ in scenario.get("context_conditions", {}).items():
        by_name[name].handoffs.add_context_conditions([
            OnContextCondition(
                target=target(c["to"], by_name),
                condition=ExpressionContextCondition(ContextExpression(c["expression"])),
                available=ExpressionAvailableCondition(ContextExpression(c["available"])) if "available" in c else None)
            for c in list_])
    for name, to in scenario.get("after", {}).items():
        by_name[name].handoffs.set_after_work(target(to, by_name))
    user = ConversableAgent(name="user", llm_config=False, human_input_mode="NEVER", code_execution_config=False)
    user.register_reply([Agent, None], lambda recipient, messages=None, sender=None, config=None: (True, TO_USER))
    marker = scenario.get("termination")
    group = DefaultPattern(
        initial_agent=by_name[scenario["initial"]], agents=members, user_agent=user,
        context_variables=ContextVariables(data=scenario.get("context", {})),
        group_after_work=target(scenario.get("after_work", "terminate"), by_name),
        group_manager_args={"is_termination_msg": lambda m: (m.get("content") == TO_USER)
                            or (bool(marker) and marker in (m.get("content") or ""))},
    )
    result, _, _ = initiate_group_chat(pattern=group, messages=scenario["message"], max_rounds=scenario["max_rounds"])
    history = result.chat_history
    speakers = [m["name"] for m in history[1:] if m.get("name") not in ("user", "_Group_Tool_Executor")]
    return {"speakers": speakers, "end": ended(scenario, history)}


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Selector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/v1"
    print(json.dumps({"selector_url": url}), flush=True)
    results = {}
    with contextlib.redirect_stdout(sys.stderr):
        for scenario in SCENARIOS:
            with IOStream.set_default(Answers(scenario.get("answers", []))):
                run = pattern if scenario["method"] == "pattern" else classic
                if scenario["method"] == "random":
                    runs = []
                    for seed in range(SEEDS):
                        random.seed(seed)
                        runs.append(run(scenario, url))
                    results[scenario["name"]] = runs
                else:
                    results[scenario["name"]] = run(scenario, url)
    print(json.dumps(results), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
