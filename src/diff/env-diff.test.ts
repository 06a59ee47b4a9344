import { describe, expect, it } from 'vitest';
import { compileCondition, diffEnvFolders, diffSchemaFiles, type Finding } from '../internal.js';

const brief = (fs: readonly Finding[]): string[] => fs.map((f) => `${f.severity} ${f.rule} ${f.location}`).sort();

describe('env-level diff', () => {
  it('an env against itself has no findings', async () => {
    expect(await diffEnvFolders('fixtures/weather', 'fixtures/weather')).toEqual([]);
  });

  it('weather → weather-v2: each change with the severity that follows from who consumes it', async () => {
    const findings = await diffEnvFolders('fixtures/weather', 'fixtures/schema-pairs/weather-v2');
    expect(brief(findings)).toEqual([
      'breaking enabled-if-narrowed /actions/get_weather/enabled_if',
      'breaking maximum-raised /rewards/llm_score/maximum',
      'breaking reward-source-removed /rewards/api_latency',
      'breaking string-length-min-raised /actions/get_weather/properties/city/minLength',
      'info action-added /actions/get_forecast',
      'info minimum-raised /state/properties/current_weather/properties/temperature/minimum',
      'info property-added /state/properties/mood',
      'warning reward-delay-ms-changed /rewards/llm_score/delay_ms',
    ]);
    const narrowed = findings.find((f) => f.rule === 'enabled-if-narrowed');
    // The witness is a state in which the action was enabled and no longer is.
    expect(compileCondition('user_location != null').evaluate(narrowed?.witness)).toBe(true);
    expect(compileCondition('user_location != null and pending_requests.length > 0').evaluate(narrowed?.witness)).toBe(false);
  });

  it('weather → weather-v3: an enabled_if left reading a field the state no longer declares is breaking', async () => {
    const findings = await diffEnvFolders('fixtures/weather', 'fixtures/schema-pairs/weather-v3');
    expect(brief(findings.filter((f) => f.severity === 'breaking'))).toEqual([
      'breaking constraints-removed /state/properties/user_location',
      'breaking enabled-if-dangling /actions/get_weather/enabled_if',
    ]);
    const dangling = findings.find((f) => f.rule === 'enabled-if-dangling');
    expect(compileCondition('user_location != null').evaluate(dangling?.witness)).toBe(false);
  });

  it('reverse direction: v2 → weather reports the opposite changes', async () => {
    const findings = await diffEnvFolders('fixtures/schema-pairs/weather-v2', 'fixtures/weather');
    expect(brief(findings.filter((f) => f.severity === 'breaking'))).toEqual([
      'breaking action-removed /actions/get_forecast',
      // v2 declared mood: string; undeclared on an open object, the env may now emit any mood.
      'breaking constraints-removed /state/properties/mood',
      'breaking minimum-lowered /state/properties/current_weather/properties/temperature/minimum',
    ]);
  });
});

describe('real schema evolutions: tau-bench → tau2-bench (snapshot of rule ids)', () => {
  it.each(['airline', 'retail'])('%s', async (domain) => {
    const findings = await diffSchemaFiles(`fixtures/realworld/tau-bench-${domain}-tools.json`, `fixtures/realworld/tau2-bench-${domain}-tools.json`);
    expect(brief(findings)).toMatchSnapshot();
    for (const f of findings.filter((x) => x.severity === 'breaking')) expect(f.witness).toBeDefined();
  });

  it('airline in full mode: the vacuous Union[Model, dict] parameters loosen what stored trajectories may hold', async () => {
    const findings = await diffSchemaFiles('fixtures/realworld/tau-bench-airline-tools.json', 'fixtures/realworld/tau2-bench-airline-tools.json', { mode: 'full' });
    const subjects = new Set(findings.filter((f) => f.severity === 'breaking').map((f) => f.subject));
    expect([...subjects].sort()).toEqual(['book_reservation', 'send_certificate', 'think', 'update_reservation_flights', 'update_reservation_passengers']);
  });

  it('normalized and raw pydantic schemas are the same schemas', async () => {
    for (const domain of ['airline', 'retail', 'telecom']) {
      const findings = await diffSchemaFiles(`fixtures/realworld/tau2-bench-${domain}-tools.json`, `fixtures/realworld/tau2-bench-${domain}-tools-normalized.json`, { mode: 'full' });
      expect(findings.filter((f) => f.severity !== 'info'), domain).toEqual([]);
    }
  });
});
