import { describe, expect, it } from 'vitest';
import { compileCondition, ConditionSyntaxError, schemaDeclaresPath } from './enabled-if.js';

const state = {
  user_location: '上海',
  current_weather: null,
  user: { id: 'sara_doe_496', verified: true, membership: 'gold', passport: { number: 'X1' } },
  pending_requests: ['a', 'b'],
  count: 3,
};

describe('enabled_if', () => {
  const cases: [string, boolean][] = [
    ['user_location != null', true],
    ['current_weather == null', true],
    ['missing.deep.path == null', true],
    ['user.verified', true],
    ['not user.verified', false],
    ['!current_weather', true],
    ['count >= 3 and count < 4', true],
    ['count > 3 || user.membership == "gold"', true],
    ["user.membership in ['silver', 'gold']", true],
    ["user.membership not in ['silver', 'gold']", false],
    ["'a' in pending_requests", true],
    ['pending_requests.length == 2', true],
    ['pending_requests[1] == "b"', true],
    ['user["passport"].number == "X1"', true],
    ['count < "4"', false],
    ['null < 1', false],
    ["'id' in user", true],
    ['(count == 1 or count == 3) and not (user_location == "北京")', true],
    ['count == -3', false],
    ['[]', false],
  ];
  it.each(cases)('%s → %s', (src, expected) => {
    expect(compileCondition(src).evaluate(state)).toBe(expected);
  });

  it('collects the paths it reads', () => {
    expect(compileCondition('user.passport.number != null and items[0].id in ["x"]').paths).toEqual([
      ['user', 'passport', 'number'],
      ['items', '0', 'id'],
    ]);
  });

  it.each([
    ['user_location = null', /single '='/],
    ['count >', /ends too early/],
    ['(count == 1', /expected '\)'/],
    ['count == 1 count', /unexpected 'count'/],
    ["'unterminated", /unterminated string/],
    ['count == #', /unexpected character '#'/],
    ['and x', /needs an operand/],
    ['x in [y]', /only literals/],
  ])('rejects %s with a located error', (src, message) => {
    expect(() => compileCondition(src)).toThrow(ConditionSyntaxError);
    expect(() => compileCondition(src)).toThrow(message);
  });

  it('cannot reach anything but the state', () => {
    const c = compileCondition('constructor == null and __proto__ == null and toString == null');
    expect(c.evaluate({})).toBe(true);
  });
});

describe('schemaDeclaresPath', () => {
  const schema = {
    type: 'object',
    $defs: { Passport: { type: 'object', properties: { number: { type: 'string' } } } },
    properties: {
      user: { type: ['object', 'null'], properties: { passport: { $ref: '#/$defs/Passport' } } },
      items: { type: 'array', items: { type: 'object', properties: { id: { type: 'string' } } } },
      flights: { type: 'object', additionalProperties: { type: 'object', properties: { status: { type: 'string' } } } },
      either: { anyOf: [{ type: 'object', properties: { a: { type: 'number' } } }, { type: 'null' }] },
    },
  };
  it.each([
    [['user', 'passport', 'number'], true],
    [['items', '0', 'id'], true],
    [['items', 'length'], true],
    [['flights', 'HAT001', 'status'], true],
    [['either', 'a'], true],
    [['user', 'nickname'], false],
    [['items', 'id'], false],
    [['nope'], false],
  ])('%j → %s', (tokens, expected) => {
    expect(schemaDeclaresPath(schema, tokens)).toBe(expected);
  });
});
