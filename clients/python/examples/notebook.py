# %% [markdown]
# # agentwire from a notebook
# Start the server first (`cargo run` in the repository): it serves the
# built-in `demo` agent on http://127.0.0.1:8080. Each `# %%` is a cell.

# %%
import os

from agentwire import Client, InputRequest, Print, RunComplete, ToolCall

client = Client(os.environ.get("AGENTWIRE_URL", "http://127.0.0.1:8080"))
chat = client.start_chat("demo", "hello")
print("".join(e.content for e in chat.run() if isinstance(e, Print)))

# %% The agent asks; we answer.
chat.send("ask: Your name?")
for e in chat.run():
    if isinstance(e, InputRequest):
        chat.answer(e.request_id, "Ada")
    elif isinstance(e, RunComplete):
        print("run", e.reason)

# %% A component the UI would render: we answer it as the UI would.
chat.send("ui: multiple_choice")
for e in chat.run():
    if isinstance(e, ToolCall) and e.awaiting_response:
        chat.respond(e.corr, {"choice": "b"})
print(chat.last_seq, "envelopes so far")

# %% Later, from anywhere: pick the chat up after what we hold.
again = client.open_chat(chat.id, last_seq=chat.last_seq - 2)
print([again.next(10).type for _ in range(2)])
client.close()
