/** The live view of `agent run` on a TTY. Components take plain props; `LiveRunView` wires the hook. */
import { Box, Static, Text } from 'ink';
import type { RunConfig } from '../events/run-events.js';
import type { RunProgress } from '../run/run-stats.js';
import { bar, formatDuration, formatNumber } from './format.js';
import { noWorkers } from './plain-reporter.js';
import type { RunSource } from './run-source.js';
import { useRunView, type EpisodeRow } from './use-run-view.js';
import { returnText } from './episode-returns.js';

const MAX_PENDING_ROWS = 8;

export function EpisodeLine({ row }: { readonly row: EpisodeRow }) {
  const ok = row.reason !== 'policy_error' && row.reason !== 'interrupted';
  return (
    <Text>
      <Text color={ok ? 'green' : 'red'}>{ok ? '✓' : '✗'}</Text> episode {row.episode}: {row.steps} steps, reward {returnText({ value: row.reward, pending: row.pending }, (n) => formatNumber(n))}, {formatDuration(row.durationMs)}{' '}
      <Text dimColor>({row.reason}{row.error ? `: ${row.error}` : ''})</Text>
    </Text>
  );
}

export function PendingTable({ progress }: { readonly progress: RunProgress }) {
  const rows = progress.pending.slice(0, MAX_PENDING_ROWS);
  return (
    <Box flexDirection="column">
      <Text bold>
        Pending <Text dimColor>(oldest first, {progress.pending.length} in flight)</Text>
      </Text>
      {rows.length === 0 ? <Text dimColor>  none</Text> : null}
      {rows.map((p) => {
        const age = progress.now - p.started_at;
        return (
          <Text key={p.trace_id}>
            {'  '}
            {p.trace_id.padEnd(14)} {p.tool.padEnd(18)} <Text color={age > 5_000 ? 'red' : age > 1_000 ? 'yellow' : undefined}>{formatDuration(age)}</Text>
          </Text>
        );
      })}
      {progress.pending.length > rows.length ? <Text dimColor>  … {progress.pending.length - rows.length} more</Text> : null}
    </Box>
  );
}

/** Per delayed source: pending / arrived / imputed / late, then the latest values (late ones in red). */
export function RewardFlow({ progress }: { readonly progress: RunProgress }) {
  const flow = Object.entries(progress.reward_flow ?? {});
  return (
    <Box flexDirection="column">
      <Text bold>Rewards</Text>
      {flow.map(([name, c]) => (
        <Text key={name}>
          {'  '}
          {name.padEnd(16)} <Text color={c.pending > 0 ? 'yellow' : undefined}>{c.pending} pending</Text> · <Text color="green">{c.arrived} arrived</Text> · {c.imputed} imputed ·{' '}
          <Text color={c.late > 0 ? 'red' : undefined}>{c.late} late</Text>
          {c.failed > 0 ? <Text color="red"> · {c.failed} failed</Text> : null}
        </Text>
      ))}
      {progress.recent_rewards.length === 0 ? <Text dimColor>  none yet</Text> : null}
      {progress.recent_rewards.slice(-4).map((r, i) => (
        <Text key={`${r.trace_id}-${r.source}-${i}`} color={r.status === 'late' ? 'red' : r.status === 'imputed' ? 'yellow' : undefined}>
          {'  '}
          {r.source} = {formatNumber(r.value)} <Text dimColor>({r.trace_id}{r.status === 'arrived' ? '' : `, ${r.status}`})</Text>
        </Text>
      ))}
    </Box>
  );
}

export function RunPanel({ config, progress, warnings, headline }: { readonly config: RunConfig; readonly progress: RunProgress; readonly warnings: readonly string[]; readonly headline?: string | undefined }) {
  const failures = Object.entries(progress.tools).filter(([, t]) => t.failed > 0);
  return (
    <Box flexDirection="column" marginTop={1}>
      <Text>
        <Text bold>agent run</Text> · {config.env} · policy {config.policy} · seed {config.seed} · concurrency {config.concurrency}{config.threads ? ` over ${config.threads} threads` : ''}
      </Text>
      <Text>
        <Text color="cyan">{bar(progress.episodes_done, progress.episodes_total)}</Text> {progress.episodes_done}/{progress.episodes_total} episodes · {progress.steps} steps ·{' '}
        {formatNumber(progress.steps_per_second)} steps/s
      </Text>
      {headline ? <Text bold>{headline}</Text> : null}
      {progress.store_down ? (
        <Text color="red" bold>
          ⏸ paused: state store {progress.store_down.store} unreachable for {formatDuration(progress.now - progress.store_down.since)}, retrying
        </Text>
      ) : null}
      {progress.workers ? <WorkersLine workers={progress.workers} now={progress.now} /> : null}
      <PendingTable progress={progress} />
      <Text bold>Errors by tool</Text>
      {failures.length === 0 ? <Text dimColor>  none</Text> : null}
      {failures.map(([name, t]) => (
        <Text key={name} color="red">
          {'  '}
          {name}: {t.failed}/{t.calls} failed ({Object.entries(t.errors).map(([code, n]) => `${code}×${n}`).join(', ')})
        </Text>
      ))}
      <RewardFlow progress={progress} />
      {warnings.map((w, i) => (
        <Text key={i} color="yellow">
          ⚠ {w}
        </Text>
      ))}
    </Box>
  );
}

/** A distributed run's workers: how many are alive and what they hold, or how long there have been none. */
export function WorkersLine({ workers, now }: { readonly workers: NonNullable<RunProgress['workers']>; readonly now: number }) {
  if (workers.alive.length === 0) {
    return (
      <Text color="red" bold>
        ⏸ {noWorkers(workers.queue)} ({formatDuration(now - (workers.none_since ?? now))})
      </Text>
    );
  }
  const running = workers.alive.reduce((n, w) => n + w.running, 0);
  const slots = workers.alive.reduce((n, w) => n + w.concurrency, 0);
  return (
    <Text>
      <Text bold>Workers</Text> {workers.alive.length} alive · {running}/{slots} episodes in hand <Text dimColor>({workers.alive.map((w) => w.id).slice(0, 4).join(', ')}{workers.alive.length > 4 ? ', …' : ''})</Text>
    </Text>
  );
}

export function LiveRunView({ source }: { readonly source: RunSource }) {
  const { progress, finished, warnings } = useRunView(source);
  return (
    <>
      <Static items={[...finished]}>{(row) => <EpisodeLine key={row.episode} row={row} />}</Static>
      <RunPanel config={source.config} progress={progress} warnings={warnings} headline={source.headline?.()} />
    </>
  );
}
