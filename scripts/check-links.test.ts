import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scratch } from '../commands/testing.js';
import { checkLinks } from './check-links.js';

const tmp = scratch();
afterAll(() => tmp.cleanup());

describe('check-links', () => {
  it('finds a missing page and a missing anchor, and takes clean URLs, folders, assets and external links', async () => {
    const dist = await tmp.dir('site-');
    await mkdir(path.join(dist, 'guide'));
    await writeFile(path.join(dist, 'index.html'), '<a href="/guide/runs#the-run-folder">ok</a><a href="/guide/">folder</a><a href="https://example.com/x#y">ext</a><a href="/img/a.png">asset</a>');
    await writeFile(path.join(dist, 'guide', 'index.html'), '<h1 id="guide">Guide</h1><a href="#guide">self</a><a href="runs#nope">bad anchor</a><a href="../gone">bad page</a>');
    await writeFile(path.join(dist, 'guide', 'runs.html'), '<h2 id="the-run-folder">The run folder</h2>');
    await mkdir(path.join(dist, 'img'));
    await writeFile(path.join(dist, 'img', 'a.png'), '');
    const { checked, broken } = checkLinks(dist);
    expect(checked).toBe(6);
    expect(broken).toEqual([
      { page: path.join('guide', 'index.html'), href: 'runs#nope', why: `no #nope on ${path.join('guide', 'runs.html')}` },
      { page: path.join('guide', 'index.html'), href: '../gone', why: 'no such page' },
    ]);
  });
});
