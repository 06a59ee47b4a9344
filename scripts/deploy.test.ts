/**
 * The deployment examples cannot run here (no cluster, no Docker registry): their structure is
 * checked instead. Every `agent` command line in them must parse with the real CLI's flags, the
 * probes must hit the worker's health routes on a declared port, and KEDA must watch the queue
 * stream and group that workers read.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { createProgram } from '../commands/main.js';
import { DEFAULT_QUEUE } from '../src/run/episode-queue.js';

type Doc = Record<string, unknown>;
const load = (file: string): Doc[] => parseAllDocuments(readFileSync(file, 'utf8')).map((d) => d.toJSON() as Doc);
const at = (v: unknown, ...keys: (string | number)[]): unknown => keys.reduce<unknown>((o, k) => (o as Record<string | number, unknown> | undefined)?.[k], v);

/** Flags of `agent <command>` that the args use but the CLI does not have. */
function unknownFlags(args: readonly string[]): string[] {
  const program = createProgram({ stdout: process.stdout, stderr: process.stderr, exitCode: 0 });
  const command = program.commands.find((c) => c.name() === args[0]);
  if (!command) return [`unknown command ${String(args[0])}`];
  const known = new Set(command.options.map((o) => o.long));
  return args.filter((a) => a.startsWith('--') && !known.has(a));
}

describe('deployment examples', () => {
  it('Kubernetes: a worker Deployment with readiness and liveness on the health port, and KEDA scaling on the queue', () => {
    const [deployment] = load('deploy/kubernetes/worker-deployment.yaml');
    expect(at(deployment, 'kind')).toBe('Deployment');
    const container = at(deployment, 'spec', 'template', 'spec', 'containers', 0) as Doc;
    const args = container['args'] as string[];
    expect(args[0]).toBe('worker');
    expect(unknownFlags(args)).toEqual([]);
    const ports = (container['ports'] as Doc[]).map((p) => p['name']);
    expect(at(container, 'readinessProbe', 'httpGet')).toMatchObject({ path: '/ready' });
    expect(at(container, 'livenessProbe', 'httpGet')).toMatchObject({ path: '/live' });
    expect(ports).toContain(at(container, 'readinessProbe', 'httpGet', 'port'));
    expect(args[args.indexOf('--health-port') + 1]).toBe(String(at(container, 'ports', 0, 'containerPort')));
    expect(at(deployment, 'spec', 'selector', 'matchLabels')).toEqual(at(deployment, 'spec', 'template', 'metadata', 'labels'));

    const [scaled] = load('deploy/kubernetes/worker-scaledobject.yaml');
    expect(at(scaled, 'kind')).toBe('ScaledObject');
    expect(at(scaled, 'spec', 'scaleTargetRef', 'name')).toBe(at(deployment, 'metadata', 'name'));
    const trigger = at(scaled, 'spec', 'triggers', 0) as Doc;
    expect(trigger['type']).toBe('redis-streams');
    expect(trigger['metadata']).toMatchObject({ stream: DEFAULT_QUEUE, consumerGroup: 'workers' });
  });

  it('Kubernetes: rollouts on workers, one agent serve --workers on the Redis and queue the worker Deployment reads, behind a Service', () => {
    const [deployment, service] = load('deploy/kubernetes/rollouts-serve.yaml');
    const container = at(deployment, 'spec', 'template', 'spec', 'containers', 0) as Doc;
    const args = container['args'] as string[];
    expect(args[0]).toBe('serve');
    expect(unknownFlags(args)).toEqual([]);
    const store = (env: unknown): unknown => (env as Doc[]).find((e) => e['name'] === 'AGENT_STORE')?.['value'];
    const worker = at(load('deploy/kubernetes/worker-deployment.yaml')[0], 'spec', 'template', 'spec', 'containers', 0) as Doc;
    expect(args[args.indexOf('--workers') + 1]).toBe('$(AGENT_STORE)');
    expect(store(container['env'])).toBe(store(worker['env']));
    // Neither names a queue: both use the default one.
    expect([args, worker['args'] as string[]].map((a) => a.includes('--queue'))).toEqual([false, false]);
    expect(at(container, 'readinessProbe', 'httpGet')).toMatchObject({ path: '/health', port: 'ws' });
    expect(args[args.indexOf('--port') + 1]).toBe(String(at(container, 'ports', 0, 'containerPort')));
    expect(at(deployment, 'spec', 'replicas')).toBe(1);
    expect(at(service, 'spec', 'selector')).toEqual(at(deployment, 'spec', 'template', 'metadata', 'labels'));
    expect(at(service, 'spec', 'ports', 0, 'targetPort')).toBe('ws');
  });

  it('docker compose: Redis with fsync per write, workers with a health check, a distributed coordinator', () => {
    const [compose] = load('deploy/docker-compose.yml');
    const services = at(compose, 'services') as Record<string, Doc>;
    expect(Object.keys(services).sort()).toEqual(['coordinator', 'redis', 'worker']);
    expect((services['redis']?.['command'] as string[]).join(' ')).toMatch(/--appendonly yes --appendfsync always/);
    const worker = services['worker']?.['command'] as string[];
    const coordinator = services['coordinator']?.['command'] as string[];
    expect(unknownFlags(worker)).toEqual([]);
    expect(unknownFlags(coordinator)).toEqual([]);
    expect(coordinator).toContain('--distributed');
    expect(JSON.stringify(services['worker']?.['healthcheck'])).toContain(`:${worker[worker.indexOf('--health-port') + 1]}/ready`);
  });

  it('observability: Jaeger takes OTLP over HTTP on 4318, Prometheus scrapes the ports the observability page runs with', () => {
    const [compose] = load('deploy/observability/docker-compose.yml');
    const services = at(compose, 'services') as Record<string, Doc>;
    expect(services['jaeger']?.['ports']).toContain('4318:4318');
    const volume = (services['prometheus']?.['volumes'] as string[])[0] as string;
    const [config] = load(`deploy/observability/${volume.split(':')[0]?.replace('./', '') ?? ''}`);
    const targets = at(config, 'scrape_configs', 0, 'static_configs', 0, 'targets') as string[];
    const page = readFileSync('docs/how-to/observability.md', 'utf8');
    const command = /npx agent (run [^\n]*--port (\d+)[^\n]*)/.exec(page);
    expect(unknownFlags((command?.[1] ?? '').split(/\s+/))).toEqual([]);
    expect(targets).toContain(`host.docker.internal:${command?.[2] ?? ''}`);
    // And a worker's health port as the Kubernetes example sets it.
    const worker = at(load('deploy/kubernetes/worker-deployment.yaml')[0], 'spec', 'template', 'spec', 'containers', 0, 'args') as string[];
    expect(targets).toContain(`host.docker.internal:${worker[worker.indexOf('--health-port') + 1] ?? ''}`);
  });
});
