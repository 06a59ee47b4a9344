// An agent program as people write them: the `@anthropic-ai/sdk` tool loop, the environment's
// tools over MCP. Nothing in it knows about the toolkit: run it with
//   agent run <env> --policy cmd:'node examples/agents/anthropic-tools.mjs' --llm-base-url … --tokens
// and every model call it makes becomes a token-exact turn of its episode. `--stream` streams them.
import Anthropic from '@anthropic-ai/sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const task = JSON.parse(process.env.AGENT_TASK ?? '{}');
const stream = process.argv.includes('--stream');
const mcp = new Client({ name: 'anthropic-tools-agent', version: '1.0.0' });
await mcp.connect(new StreamableHTTPClientTransport(new URL(process.env.AGENT_MCP_URL)));
const anthropic = new Anthropic(); // ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY from the environment
const messages = [{ role: 'user', content: task.instruction ?? 'Solve the task with the tools.' }];
for (let turn = 0; turn < 10; turn++) {
  const { tools } = await mcp.listTools();
  if (tools.length === 0) break;
  const request = { model: process.env.AGENT_MODEL, max_tokens: 1024, messages, tools: tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema })) };
  const reply = stream ? await anthropic.messages.stream(request).finalMessage() : await anthropic.messages.create(request);
  messages.push({ role: 'assistant', content: reply.content });
  const uses = reply.content.filter((block) => block.type === 'tool_use');
  if (uses.length === 0) break;
  const results = [];
  for (const use of uses) {
    const result = await mcp.callTool({ name: use.name, arguments: use.input });
    results.push({ type: 'tool_result', tool_use_id: use.id, content: result.content.map((c) => c.text).join('') });
  }
  messages.push({ role: 'user', content: results });
}
await mcp.close();
