// An agent program on OpenAI's Responses API (what the Agents SDK and Codex-style programs call),
// the environment's tools over MCP. Nothing in it knows about the toolkit: run it with
//   agent run <env> --policy cmd:'node examples/agents/openai-responses.mjs' --llm-base-url … --tokens
// `--stream` streams the responses; `--previous` sends only what is new, with previous_response_id.
import OpenAI from 'openai';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const task = JSON.parse(process.env.AGENT_TASK ?? '{}');
const stream = process.argv.includes('--stream');
const chained = process.argv.includes('--previous');
const mcp = new Client({ name: 'openai-responses-agent', version: '1.0.0' });
await mcp.connect(new StreamableHTTPClientTransport(new URL(process.env.AGENT_MCP_URL)));
const openai = new OpenAI(); // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
let input = [{ role: 'user', content: task.instruction ?? 'Solve the task with the tools.' }];
let previous;
for (let turn = 0; turn < 10; turn++) {
  const { tools } = await mcp.listTools();
  if (tools.length === 0) break;
  const request = { model: process.env.AGENT_MODEL, input, tools: tools.map((t) => ({ type: 'function', name: t.name, description: t.description, parameters: t.inputSchema, strict: false })), ...(previous ? { previous_response_id: previous } : {}) };
  const response = stream ? await openai.responses.stream(request).finalResponse() : await openai.responses.create(request);
  const calls = response.output.filter((item) => item.type === 'function_call');
  if (calls.length === 0) break;
  const outputs = [];
  for (const call of calls) {
    const result = await mcp.callTool({ name: call.name, arguments: JSON.parse(call.arguments) });
    outputs.push({ type: 'function_call_output', call_id: call.call_id, output: result.content.map((c) => c.text).join('') });
  }
  if (chained) {
    previous = response.id;
    input = outputs;
  } else input = [...input, ...response.output, ...outputs];
}
await mcp.close();
