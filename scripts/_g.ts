import { readFileSync } from 'node:fs';
import { parseActionDocument, Rng } from '../src/index.js';
import { generate } from '../src/schema/fuzz/generate.js';
const files = ['bfcl/bfcl-functions-normalized.json', 'tau-bench-airline-tools.json', 'tau2-bench-airline-tools.json', 'tau2-bench-telecom-user-tools.json', 'mcp-reference-tools.json', 'tau2-bench-retail-tools.json'];
for (const f of files) {
  const fns = JSON.parse(readFileSync('fixtures/realworld/' + f, 'utf8')) as object[];
  let ok = 0, unsat = 0, misses = 0; const failed: string[] = [];
  const t0 = performance.now();
  fns.forEach((fn, i) => {
    const a = parseActionDocument([fn], { file: f }).actions[0];
    if (!a) return;
    if (a.unsatisfiable) { unsat++; return; }
    const rng = new Rng(i);
    let good = true;
    for (let k = 0; k < 5; k++) { const g = generate(a.parameters, rng); misses += g.misses; if (g.value === undefined) { good = false; } }
    if (good) ok++; else failed.push(a.name);
  });
  console.log(f, `ok ${ok}/${fns.length - unsat} (unsat ${unsat}) misses ${misses} ${(performance.now() - t0).toFixed(0)}ms`, failed.slice(0, 8).join(' '));
}
