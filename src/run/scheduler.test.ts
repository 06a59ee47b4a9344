import { describe, expect, it } from 'vitest';
import type { EpisodeControl, EpisodeDriver } from './episode-runner.js';
import type { EpisodeFinishedEvent, JournalEpisode } from './run-journal.js';
import { PoolScheduler, type EpisodeLauncher } from './scheduler.js';
import { SessionScheduler } from './session-scheduler.js';

/** A launcher that records which episodes it ran and with what, each ended by `end` (default: at once). */
function launcher(options: { resumed?: Map<number, JournalEpisode>; stopAfter?: number; reset?: 'fails' } = {}) {
  const ran: { index: number; driver?: EpisodeDriver }[] = [];
  let inFlight = 0;
  let most = 0;
  const l: EpisodeLauncher & { ran: typeof ran; most(): number } = {
    ran,
    most: () => most,
    resumed: options.resumed,
    stopped: () => options.stopAfter !== undefined && ran.length >= options.stopAfter,
    // The pool and the session scheduler run episodes here: nothing comes back from elsewhere.
    committed: () => expect.fail('a local scheduler reported a remote event'),
    ended: () => expect.fail('a local scheduler reported a remote episode'),
    breathe: () => Promise.resolve(),
    async episode(index, signal, driver) {
      ran.push({ index, ...(driver ? { driver } : {}) });
      inFlight++;
      most = Math.max(most, inFlight);
      const finished = { type: 'episode_finished', episode: index, reason: 'done' } as unknown as EpisodeFinishedEvent;
      try {
        driver?.begin?.(index);
        if (driver?.drive && options.reset !== 'fails') {
          const end = await driver.drive({ episode: index } as EpisodeControl, signal);
          return { ...finished, reason: end.reason };
        }
        await new Promise((r) => setImmediate(r));
        const f = options.reset === 'fails' ? ({ ...finished, reason: 'policy_error', error: { code: 'STATE_INVALID', message: 'the initial state breaks the schema' } } as unknown as EpisodeFinishedEvent) : finished;
        driver?.over?.(f);
        return f;
      } finally {
        inFlight--;
      }
    },
  };
  return l;
}

const running = (initial: number): JournalEpisode => ({ status: 'running', instance_id: `ep-${initial}`, initial_state_id: `initial-${initial}`, started_at: 0 }) as JournalEpisode;
const finished = (): JournalEpisode => ({ status: 'finished' }) as JournalEpisode;

describe('PoolScheduler', () => {
  it('runs every episode, at most C at a time, skipping those a resumed journal finished', async () => {
    const l = launcher({ resumed: new Map([[1, finished()]]) });
    await new PoolScheduler(6, 2).drive(l, new AbortController().signal);
    expect(l.ran.map((r) => r.index)).toEqual([0, 2, 3, 4, 5]);
    expect(l.most()).toBe(2);
  });

  it('starts no episode once the run is stopped', async () => {
    const l = launcher({ stopAfter: 3 });
    await new PoolScheduler(10, 1).drive(l, new AbortController().signal);
    expect(l.ran).toHaveLength(3);
  });
});

describe('SessionScheduler', () => {
  const drivenBy = (end: Promise<void>) => ({ drive: async () => (await end, { reason: 'client_closed' as const, reward: 0 }) });

  it('starts episodes pushed before and while it drives, numbered in order, and hands each its control', async () => {
    const sessions = new SessionScheduler();
    const l = launcher();
    let close!: () => void;
    const ended = new Promise<void>((r) => (close = r));
    const early = sessions.open(drivenBy(ended));
    const driving = sessions.drive(l, new AbortController().signal);
    expect((await early).episode).toBe(0);
    expect((await sessions.open(drivenBy(ended))).episode).toBe(1);
    await expect(sessions.start({ policy: () => null })).resolves.toMatchObject({ episode: 2 });
    close();
    sessions.close();
    await driving;
    expect(l.ran.map((r) => r.index)).toEqual([0, 1, 2]);
  });

  it('refuses an episode once closed, and one opened while it stops', async () => {
    const sessions = new SessionScheduler();
    const waiting = sessions.open(drivenBy(Promise.resolve()));
    sessions.close();
    await expect(waiting).rejects.toMatchObject({ code: 'INTERRUPTED' });
    await expect(sessions.start({})).rejects.toMatchObject({ code: 'INTERRUPTED' });
    await sessions.drive(launcher(), new AbortController().signal);
  });

  it("says why an episode never started (its reset failed), and ends a resumed run's open episodes client_lost first", async () => {
    const sessions = new SessionScheduler();
    const l = launcher({ resumed: new Map([[0, finished()], [3, running(1)]]), reset: 'fails' });
    const stop = new AbortController();
    const driving = sessions.drive(l, stop.signal);
    await expect(sessions.open(drivenBy(Promise.resolve()))).rejects.toThrow(/could not start: the initial state breaks the schema/);
    stop.abort();
    await driving;
    // The open episode of the resumed run kept its index and its state; new ones are numbered after the journal's.
    expect(l.ran.map((r) => [r.index, r.driver?.initialIndex])).toEqual([
      [3, 1],
      [4, undefined],
    ]);
  });
});
