/**
 * The floor under bench/lib/cold-probe.ts: the same N agents × M awaits of a 20 ms timer, in plain
 * Node with no toolkit at all. What the machine allows; argv N M; prints {ratio, cpuUsPerStep}.
 */
const [n, m] = process.argv.slice(2).map(Number) as [number, number];
const LATENCY_MS = 20;
const tool = async (): Promise<{ observation: null }> => {
  await new Promise((r) => setTimeout(r, LATENCY_MS));
  return { observation: null };
};
async function run(): Promise<void> {
  for (let i = 0; i < m; i++) await tool();
}
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await Promise.all(Array.from({ length: n }, run));
const seconds = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({ ratio: (n * m) / seconds / (n / (LATENCY_MS / 1000)), cpuUsPerStep: (cpu.user + cpu.system) / (n * m) }));
