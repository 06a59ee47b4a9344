import { describe, expect, it } from 'vitest';
import { chatMessages, chatTurns, readChatTurns } from './chat-turns.js';

describe('chat turns read from data (a task\'s history)', () => {
  it('read back as the messages they were written from', () => {
    const turns = [
      { role: 'user', content: 'Book it.' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'book', arguments: '{"id":"F1"}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'booked' },
      { role: 'assistant', content: 'Booked F1.' },
    ];
    const read = readChatTurns(turns, '/history', () => expect.unreachable());
    expect(read?.[2]).toEqual({ role: 'tool', tool_call_id: 'c1', name: 'book', content: 'booked' });
    const messages = chatMessages(read ?? []);
    expect(messages[1]).toEqual({ role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'book', arguments: { id: 'F1' } }] });
    expect(chatTurns('', messages)).toEqual(read);
  });

  it('name each malformed turn by its JSON pointer', () => {
    const issues: [string, string][] = [];
    const read = readChatTurns(
      [{ role: 'robot', content: 'x' }, { role: 'user' }, { role: 'assistant', tool_calls: [{ id: 'c', function: { name: 'f', arguments: '[1]' } }] }, { role: 'tool', tool_call_id: 'nope', content: 'x' }, { role: 'assistant', content: '' }],
      '/history',
      (pointer, message) => issues.push([pointer, message]),
    );
    expect(read).toBeUndefined();
    expect(issues.map(([p]) => p)).toEqual(['/history/0/role', '/history/1/content', '/history/2/tool_calls/0/function/arguments', '/history/3/tool_call_id', '/history/4']);
    expect(issues[3]?.[1]).toMatch(/must name a tool call of an earlier assistant turn/);
    expect(readChatTurns({}, '/history', (p, m) => issues.push([p, m]))).toBeUndefined();
    expect(issues.at(-1)?.[0]).toBe('/history');
  });
});
