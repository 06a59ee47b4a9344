// An agent program as people write them: the `openai` package's tool loop, the environment's
// tools over MCP. Nothing in it knows about the toolkit: run it with
//   agent run <env> --policy cmd:'node examples/agents/openai-tools.mjs' --llm-base-url … --tokens
// and every model call it makes becomes a token-exact turn of its episode. `--stream` streams them.
import OpenAI from 'openai';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const task = JSON.parse(process.env.AGENT_TASK ?? '{}');
const stream = process.argv.includes('--stream');
const mcp = new Client({ name: 'openai-tools-agent', version: '1.0.0' });
await mcp.connect(new StreamableHTTPClientTransport(new URL(process.env.AGENT_MCP_URL)));
const openai = new OpenAI(); // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
const messages = [{ role: 'user', content: task.instruction ?? 'Solve the task with the tools.' }];
for (let turn = 0; turn < 10; turn++) {
  const { tools } = await mcp.listTools();
  if (tools.length === 0) break;
  const request = { model: process.env.AGENT_MODEL, messages, tools: tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.inputSchema } })) };
  const reply = stream ? await openai.chat.completions.stream(request).finalChatCompletion() : await openai.chat.completions.create(request);
  const message = reply.choices[0].message;
  messages.push(message);
  if (!message.tool_calls?.length) break;
  for (const call of message.tool_calls) {
    const result = await mcp.callTool({ name: call.function.name, arguments: JSON.parse(call.function.arguments) });
    messages.push({ role: 'tool', tool_call_id: call.id, content: result.content.map((c) => c.text).join('') });
  }
}
await mcp.close();
