"""An agent program on the `anthropic` Python package: its tool loop, the environment's tools over
MCP's streamable HTTP transport (spoken by hand). Nothing in it knows about the toolkit: run it with

    agent run <env> --policy cmd:'python examples/agents/anthropic_tools.py' --llm-base-url … --tokens

and every model call it makes becomes a token-exact turn of its episode."""
import json
import os
import urllib.request

import anthropic


def mcp(method: str, params: dict, _ids=[0]) -> dict:  # noqa: B006 (a call counter)
    _ids[0] += 1
    body = json.dumps({"jsonrpc": "2.0", "id": _ids[0], "method": method, "params": params}).encode()
    request = urllib.request.Request(os.environ["AGENT_MCP_URL"], data=body, headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())["result"]


mcp("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "anthropic-python-agent", "version": "1.0"}})
task = json.loads(os.environ.get("AGENT_TASK", "{}"))
client = anthropic.Anthropic()  # ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY from the environment
messages: list[dict] = [{"role": "user", "content": task.get("instruction", "Solve the task with the tools.")}]
for _ in range(10):
    tools = mcp("tools/list", {})["tools"]
    if not tools:
        break
    reply = client.messages.create(model=os.environ["AGENT_MODEL"], max_tokens=1024, messages=messages, tools=[{"name": t["name"], "description": t.get("description", ""), "input_schema": t["inputSchema"]} for t in tools])
    messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in reply.content]})
    uses = [block for block in reply.content if block.type == "tool_use"]
    if not uses:
        break
    results = []
    for use in uses:
        result = mcp("tools/call", {"name": use.name, "arguments": use.input})
        results.append({"type": "tool_result", "tool_use_id": use.id, "content": "".join(c["text"] for c in result["content"])})
    messages.append({"role": "user", "content": results})
