// The trigger server's database on a full disk (a 2 MiB tmpfs, mounted as root) while a job launches: the run the
// launcher started is recorded once space is back and followed to its end, never a job failed beside a run that works.
// Whether SQLite needs a new block for that write depends on its write-ahead log: job-loop.test.ts pins the retry with
// a store that refuses it for certain.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SECRETS, get, makeRepo } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
const mount = mkdtempSync(join(tmpdir(), 'svc-trigger-full-'));
const mounted = process.getuid?.() === 0 &&
  spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mount]).status === 0;
const children: ChildProcess[] = [];

/** `svc start --detach` whose disk fills as it launches: it starts run r01full, fills $HOME's disk, prints its line. */
const LAUNCHER = `import { mkdirSync, readFileSync, closeSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
if (process.env.SVC_HANDOFF_FD === '3') { readFileSync(3); closeSync(3); }
const dir = join(process.cwd(), '.svc', 'runs', 'r01full');
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, 'state.json'), JSON.stringify({ source: 'local', run: 'r01full', status: 'running' }));
try {
  for (;;) writeFileSync(join(process.env.HOME, 'fill'), Buffer.alloc(4096), { flag: 'a' });
} catch {}
process.stdout.write('{"source":"local","run":"r01full"}\\n');
`;

after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  spawnSync('umount', ['--lazy', mount]);
  rmSync(mount, { recursive: true, force: true });
});

const NOT_ROOT = mounted ? false : 'needs root to mount a tmpfs';

describe('a job launched while the trigger\'s disk is full', { skip: NOT_ROOT }, () => {
  it('records its run once space is back and follows it to its end', async () => {
    const home = join(mount, 'home');
    mkdirSync(home);
    const launcher = join(home, 'launcher.mjs');
    writeFileSync(launcher, LAUNCHER);
    const repo = makeRepo();
    const env = { PATH: process.env.PATH, HOME: home, ...SECRETS, SVC_TRIGGER_CLI: launcher };
    const child = spawn(process.execPath, [CLI, 'trigger', 'serve', '--port', '0', '--repo', repo], {
      env, stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    try {
      const url = await waitFor(() => /^(http:\/\/\S+)\n/.exec(out)?.[1], 'the server to listen');
      const res = await fetch(`${url}/jobs`, {
        method: 'POST', headers: { ...bearer, 'content-type': 'application/json' }, body: '{"brief":"full disk"}',
      });
      assert.equal(res.status, 202);
      const { job_id: id } = (await res.json()) as { job_id: string };
      // A write the full disk refused (nearly always: the write-ahead log had to grow), or one it took.
      const recorded = async () => (await get(`${url}/jobs/${id}`, bearer)).body.run;
      await waitFor(async () => /could not record/.test(err) || await recorded(), 'the job\'s run recorded or refused');
      rmSync(join(home, 'fill'));
      const state = join(repo, '.svc', 'runs', 'r01full', 'state.json');
      writeFileSync(`${state}.tmp`, JSON.stringify({ source: 'local', run: 'r01full', status: 'succeeded' }));
      renameSync(`${state}.tmp`, state);
      const job = await waitFor(async () => {
        const body = (await get(`${url}/jobs/${id}`, bearer)).body as { status: string };
        return body.status === 'running' ? null : body;
      }, 'the job to end');
      assert.deepEqual(job, { ...job, status: 'succeeded', run: { source: 'local', run: 'r01full' } });
    } finally {
      child.kill('SIGKILL');
      rmSync(repo, { recursive: true, force: true });
    }
  });
});
