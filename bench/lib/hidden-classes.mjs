/**
 * Preloaded (`node --allow-natives-syntax --import ./bench/lib/hidden-classes.mjs …`) by
 * object-shapes.bench.ts: every object handed to JSON.stringify (and those nested in it, two levels
 * down) is compared with earlier objects of the same keys; one whose hidden class matches none of
 * the last 8 seen (a class deprecated by a field's new representation is replaced, so it is not
 * counted) is counted as having a class of its own. At exit, the counts by key set go to the
 * JSON file named by HIDDEN_CLASSES_OUT.
 */
import { writeFileSync } from 'node:fs';

// eslint-disable-next-line no-restricted-syntax -- V8's natives syntax cannot be written in a module's source
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)');
const seen = new Map();
const counts = new Map();

function visit(value, depth, at) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
  const keys = Object.keys(value);
  const key = `${at}{${keys.join(',')}}`;
  const count = counts.get(key) ?? { objects: 0, own_class: 0 };
  counts.set(key, count);
  count.objects++;
  const classes = seen.get(key) ?? [];
  seen.set(key, classes);
  if (!classes.some((c) => sameMap(c, value))) {
    if (classes.length > 0) count.own_class++;
    classes.push(value);
    if (classes.length > 8) classes.shift();
  }
  if (depth < 2) for (const k of keys) visit(value[k], depth + 1, `${at}${k}.`);
}

const stringify = JSON.stringify;
JSON.stringify = function (value, ...rest) {
  visit(value, 0, '');
  return stringify.call(JSON, value, ...rest);
};
process.on('exit', () => {
  const rows = [...counts].map(([keys, c]) => ({ keys, ...c })).sort((a, b) => b.own_class - a.own_class);
  if (process.env.HIDDEN_CLASSES_OUT) writeFileSync(process.env.HIDDEN_CLASSES_OUT, stringify(rows));
});
