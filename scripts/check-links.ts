/**
 * Every internal link of the built docs site lands: its page exists (clean URLs: `/guide/runs` is
 * guide/runs.html) and so does its anchor (an element with that id on the page). VitePress checks
 * pages but not anchors; a heading renamed in a move breaks anchors silently, so this reads the
 * built HTML itself. External links are not fetched (the site is built offline).
 *
 *   tsx scripts/check-links.ts [dist]   (default docs/.vitepress/dist)
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

export interface BrokenLink {
  readonly page: string;
  readonly href: string;
  readonly why: string;
}

/** The broken internal links of a built site, and how many links were checked. */
export function checkLinks(dist: string): { readonly checked: number; readonly broken: readonly BrokenLink[] } {
  const pages = htmlFiles(dist);
  const ids = new Map<string, Set<string>>();
  const idsOf = (file: string): Set<string> => {
    let set = ids.get(file);
    if (!set) ids.set(file, (set = new Set([...readFileSync(file, 'utf8').matchAll(/\sid="([^"]+)"/g)].map((m) => decodeEntities(m[1] as string)))));
    return set;
  };
  const broken: BrokenLink[] = [];
  let checked = 0;
  for (const page of pages) {
    const html = readFileSync(page, 'utf8');
    for (const m of html.matchAll(/<a\s[^>]*href="([^"]+)"/g)) {
      const href = decodeEntities(m[1] as string);
      if (/^([a-z]+:|\/\/)/i.test(href)) continue;
      checked++;
      const [target = '', fragment] = href.split('#', 2);
      const file = target === '' ? page : resolvePage(dist, page, decodeURI(target));
      const where = path.relative(dist, page);
      if (!file) broken.push({ page: where, href, why: 'no such page' });
      else if (fragment && file.endsWith('.html') && !idsOf(file).has(decodeURIComponent(fragment))) broken.push({ page: where, href, why: `no #${fragment} on ${path.relative(dist, file)}` });
    }
  }
  return { checked, broken };
}

function htmlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) return htmlFiles(p);
    return name.endsWith('.html') ? [p] : [];
  });
}

/** The file a link points to: the asset itself, `x.html` for a clean URL, or a folder's index.html. */
function resolvePage(dist: string, from: string, target: string): string | undefined {
  const base = target.startsWith('/') ? path.join(dist, target) : path.resolve(path.dirname(from), target);
  for (const candidate of [base, `${base}.html`, path.join(base, 'index.html')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

function decodeEntities(s: string): string {
  return s.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dist = path.resolve(process.argv[2] ?? path.join(ROOT, 'docs', '.vitepress', 'dist'));
  const { checked, broken } = checkLinks(dist);
  if (broken.length > 0) {
    console.error(`check-links: ${broken.length} of ${checked} internal links broken\n${broken.map((b) => `  - ${b.page}: ${b.href} (${b.why})`).join('\n')}`);
    process.exitCode = 1;
  } else console.log(`check-links: ${checked} internal links, every page and anchor there`);
}
