"""An agent program as people write them in Python: the `openai` package's tool loop, the
environment's tools over MCP's streamable HTTP transport (spoken by hand: three JSON-RPC calls).
Nothing in it knows about the toolkit: run it with

    agent run <env> --policy cmd:'python examples/agents/openai_tools.py' --llm-base-url … --tokens

and every model call it makes becomes a token-exact turn of its episode."""
import json
import os
import urllib.request

from openai import OpenAI


def mcp(method: str, params: dict, _ids=[0]) -> dict:  # noqa: B006 (a call counter)
    _ids[0] += 1
    body = json.dumps({"jsonrpc": "2.0", "id": _ids[0], "method": method, "params": params}).encode()
    request = urllib.request.Request(os.environ["AGENT_MCP_URL"], data=body, headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())["result"]


mcp("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "openai-python-agent", "version": "1.0"}})
task = json.loads(os.environ.get("AGENT_TASK", "{}"))
client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
messages: list[dict] = [{"role": "user", "content": task.get("instruction", "Solve the task with the tools.")}]
for _ in range(10):
    tools = mcp("tools/list", {})["tools"]
    if not tools:
        break
    reply = client.chat.completions.create(model=os.environ["AGENT_MODEL"], messages=messages, tools=[{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""), "parameters": t["inputSchema"]}} for t in tools])
    message = reply.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    if not message.tool_calls:
        break
    for call in message.tool_calls:
        result = mcp("tools/call", {"name": call.function.name, "arguments": json.loads(call.function.arguments)})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "".join(c["text"] for c in result["content"])})
