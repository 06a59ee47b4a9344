import { describe, expect, it } from 'vitest';
import { toolParser } from './tool-parsers.js';

const hermes = toolParser('hermes');
const llama = toolParser('llama3_json');

describe('hermes', () => {
  it('reads one call, several calls, and the content before them', () => {
    expect(hermes?.('<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>')).toEqual({ content: '', calls: [{ name: 'a', arguments: { x: 1 } }] });
    expect(hermes?.('Let me look.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": "{\\"y\\": 2}"}\n</tool_call>')).toEqual({
      content: 'Let me look.',
      calls: [
        { name: 'a', arguments: {} },
        { name: 'b', arguments: { y: 2 } },
      ],
    });
  });

  it('takes an unclosed last call as running to the end, as vLLM does', () => {
    expect(hermes?.('<tool_call>{"name": "a", "arguments": {"k": "v"}}')?.calls).toEqual([{ name: 'a', arguments: { k: 'v' } }]);
  });

  it('says why text is no valid call, and keeps plain text as content', () => {
    expect(hermes?.('<tool_call>\n{"name": "a", "arguments": {"x": }\n</tool_call>')?.invalid).toMatch(/^tool call 1: not JSON/);
    expect(hermes?.('<tool_call>{"arguments": {}}</tool_call>')?.invalid).toBe("tool call 1: no 'name'");
    expect(hermes?.('<tool_call>{"name": "a", "arguments": [1]}</tool_call>')?.invalid).toBe("tool call 1: 'arguments' is not an object");
    expect(hermes?.('The code is K7Q2.')).toEqual({ content: 'The code is K7Q2.', calls: [] });
  });
});

describe('llama3_json', () => {
  it('reads a JSON call, with or without the python tag, and several separated by ;', () => {
    expect(llama?.('{"name": "a", "parameters": {"x": 1}}')?.calls).toEqual([{ name: 'a', arguments: { x: 1 } }]);
    expect(llama?.('<|python_tag|>{"name": "a", "parameters": {"s": "x;y"}}; {"name": "b", "parameters": {}}')?.calls).toEqual([
      { name: 'a', arguments: { s: 'x;y' } },
      { name: 'b', arguments: {} },
    ]);
    expect(llama?.('Hello there.')).toEqual({ content: 'Hello there.', calls: [] });
    expect(llama?.('{"name": ')?.invalid).toMatch(/not JSON/);
  });
});

it('knows vLLM\'s names only', () => {
  expect(toolParser('mistral')).toBeUndefined();
  expect(toolParser('toString')).toBeUndefined();
});
