import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, existsSync, readdirSync, writeFileSync, utimesSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { writeHandoff, takeHandoff } from '../../src/cli/node-setup.ts';
import {
  HANDOFF_FD_VAR, HANDOFF_VAR, secretsIn, startChild, withoutSecrets, type StartOptions,
} from '../../src/spawn/start.ts';
import { resolveControlSettings } from '../../src/control/settings.ts';
import { waitFor } from '../helpers/wait-for.ts';

describe('secrets handoff', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-handoff-'));
  after(() => rmSync(home, { recursive: true, force: true }));

  it('refuses to hand secrets to an agent or a tool, which would keep fd 3 open with them', () => {
    for (const kind of ['agent', 'tool'] as const) {
      assert.throws(() => startChild(['/bin/true'], {
        kind, base: { PATH: process.env.PATH }, secrets: { GITHUB_TOKEN: 'gh-never' },
      }), RangeError);
    }
  });

  it('writes only svc secret names to a 0600 file in a 0700 folder, and names it in one variable', () => {
    const extra = writeHandoff({ GITHUB_TOKEN: 'gh-1', NOT_A_SECRET: 'x', SVC_CONTROL_TOKEN: '' }, { HOME: home });
    const path = extra[HANDOFF_VAR]!;
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(statSync(join(home, '.svc', 'handoff')).mode & 0o777, 0o700);
    const env: NodeJS.ProcessEnv = { [HANDOFF_VAR]: path, PATH: '/bin' };
    assert.deepEqual(takeHandoff(env), { GITHUB_TOKEN: 'gh-1' });
    assert.equal(existsSync(path), false, 'the receiver deleted the file');
    assert.equal(env[HANDOFF_VAR], undefined, 'and forgot its name');
  });

  it('hands nothing over when there is nothing to hand, and takes nothing from a missing or foreign file', () => {
    assert.deepEqual(writeHandoff({}, { HOME: home }), {});
    const nothing = {};
    assert.deepEqual(takeHandoff({ [HANDOFF_VAR]: join(home, 'gone.json') }), nothing);
    const foreign = join(home, 'foreign.json');
    writeFileSync(foreign, JSON.stringify({ secrets: { PATH: '/evil', LD_PRELOAD: '/evil.so', GH_TOKEN: 7 } }));
    assert.deepEqual(takeHandoff({ [HANDOFF_VAR]: foreign }), nothing);
    assert.deepEqual(readdirSync(join(home, '.svc', 'handoff')), []);
  });

  it('removes handoff files nobody took within ten minutes when it writes the next one', () => {
    const dir = join(home, '.svc', 'handoff');
    const stale = join(dir, 'crashed-receiver.json');
    writeFileSync(stale, '{}', { mode: 0o600 });
    const old = new Date(Date.now() - 11 * 60_000);
    utimesSync(stale, old, old);
    const fresh = writeHandoff({ GH_TOKEN: 'x' }, { HOME: home });
    assert.equal(existsSync(stale), false);
    assert.ok(existsSync(fresh[HANDOFF_VAR]!), 'a fresh one stays');
    rmSync(fresh[HANDOFF_VAR]!);
  });

  // The receiver, as svc's entry runs it: take the handoff, then report what it got, whether fd 3 is still open and
  // whether the environment still names it.
  const RECEIVER = `
    import { fstatSync } from 'node:fs';
    import { takeHandoff } from ${JSON.stringify(new URL('../../src/cli/node-setup.ts', import.meta.url).href)};
    const handed = takeHandoff(process.env);
    let open = true;
    try { fstatSync(3); } catch { open = false; }
    process.stdout.write(JSON.stringify({ handed, fd3Open: open, named: process.env.${HANDOFF_FD_VAR} ?? null }));
  `;

  function receive(handoff: StartOptions['secrets'], env: Record<string, string>): Promise<any> {
    const child = startChild([process.execPath, '--input-type=module', '-e', RECEIVER], {
      kind: 'svc-worker', base: { PATH: process.env.PATH, HOME: home }, extra: env, stdio: ['ignore', 'pipe', 'inherit'],
      secrets: handoff,
    });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    return new Promise((resolve) => child.on('close', () => resolve(JSON.parse(out))));
  }

  it('hands a child svc its secrets through a pipe on fd 3, which it reads and closes; no file is written', async () => {
    const handoffDir = join(home, '.svc', 'handoff');
    const before = existsSync(handoffDir) ? readdirSync(handoffDir) : [];
    const got = await receive({ GITHUB_TOKEN: 'gh-pipe', PATH: '/evil', SVC_CONTROL_TOKEN: '' }, {});
    assert.deepEqual(got, { handed: { GITHUB_TOKEN: 'gh-pipe' }, fd3Open: false, named: null });
    assert.deepEqual(existsSync(handoffDir) ? readdirSync(handoffDir) : [], before, 'nothing on disk');
  });

  it('waits for secrets given as any thenable, not only a native Promise', async () => {
    const later = { then: (give: (s: Record<string, string>) => void) => give({ GITHUB_TOKEN: 'gh-later' }) };
    const got = await receive(later as unknown as PromiseLike<Record<string, string>>, {});
    assert.deepEqual(got.handed, { GITHUB_TOKEN: 'gh-later' });
  });

  /** The child running RECEIVER with `secrets` handed on fd 3 (as a launcher) or, without, a stray SVC_HANDOFF_FD. */
  function run(secrets?: Promise<Record<string, string> | null>) {
    const child = startChild([process.execPath, '--input-type=module', '-e', RECEIVER], {
      kind: 'launcher', base: { PATH: process.env.PATH, HOME: home }, stdio: ['ignore', 'pipe', 'pipe'],
      extra: secrets ? {} : { [HANDOFF_FD_VAR]: '3' }, secrets,
    });
    const seen = { out: '', err: '' };
    child.stdout!.on('data', (c: Buffer) => (seen.out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (seen.err += c.toString()));
    const ended = new Promise<{ code: number | null; out: string; err: string }>((resolve) =>
      child.on('close', (code) => resolve({ code, ...seen })));
    return { pid: child.pid!, seen, ended };
  }

  it('refuses when SVC_HANDOFF_FD names no socket svc made (nothing to read): no word, no start', async () => {
    const got = await run().ended;
    assert.equal(got.out, '');
    assert.notEqual(got.code, 0);
    assert.match(got.err, /no go-ahead/);
  });

  it('holds a child svc at its read until its secrets are given, and one whose launch is withdrawn goes no further',
    async () => {
      let give!: (secrets: Record<string, string> | null) => void;
      const first = run(new Promise<Record<string, string> | null>((resolve) => { give = resolve; }));
      // Blocked in read(2) on fd 3 (its syscall number, then its first argument), having reported nothing yet.
      const read = process.arch === 'arm64' ? '63' : '0';
      await waitFor(() => {
        const now = readFileSync(`/proc/${first.pid}/syscall`, 'utf8').split(' ');
        return now[0] === read && now[1] === '0x3';
      }, 'the child blocked at its handoff read');
      assert.equal(first.seen.out, '');
      give({ GITHUB_TOKEN: 'gh-held' });
      assert.deepEqual(JSON.parse((await first.ended).out).handed, { GITHUB_TOKEN: 'gh-held' });
      // A parent that withdraws (or dies) sends nothing: the child never reports, never runs on without its word.
      const withdrawn = await run(Promise.resolve(null)).ended;
      assert.equal(withdrawn.out, '');
      assert.notEqual(withdrawn.code, 0);
      assert.match(withdrawn.err, /no go-ahead/);
    });

  it('keeps what a pipe handed over across the Control Plane\u2019s re-exec (a pipe does not survive execve)', async () => {
    const cli = new URL('../../dist/cli.js', import.meta.url).pathname;
    const token = 'reexec-token-5d1a';
    // No V8 flags given, so `control serve` re-executes itself to add them.
    const child = startChild([process.execPath, cli, 'control', 'serve', '--port', '0'], {
      kind: 'svc-worker', base: { PATH: process.env.PATH, HOME: home, SVC_CONTROL_DB: join(home, 'reexec.db') },
      stdio: ['ignore', 'pipe', 'inherit'], secrets: { SVC_CONTROL_TOKEN: token },
    });
    try {
      const url = await new Promise<string>((resolve) => {
        let out = '';
        child.stdout!.on('data', (c: Buffer) => {
          out += c.toString();
          const found = /http:\/\/[^\s]+/.exec(out)?.[0];
          if (found) resolve(found);
        });
      });
      assert.match(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8'), /--max-semi-space-size/, 'it did re-execute');
      const runs = await fetch(`${url}/v1/runs`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(runs.status, 200);
      assert.equal(readFileSync(`/proc/${child.pid}/environ`, 'utf8').includes(token), false);
      assert.deepEqual(readdirSync(join(home, '.svc', 'handoff')), [], 'the re-exec\u2019s file was taken');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });

  it('separates secret values from the rest of an environment; *_FILE paths are not values', () => {
    const env = { PATH: '/bin', GITHUB_TOKEN: 'a', CHATA_SIGNING_SECRET: 'b', SVC_API_TOKEN_FILE: '/run/creds/t', [HANDOFF_VAR]: '/x', [HANDOFF_FD_VAR]: '3' };
    assert.deepEqual(secretsIn(env), { GITHUB_TOKEN: 'a', CHATA_SIGNING_SECRET: 'b' });
    assert.deepEqual(withoutSecrets(env), { PATH: '/bin', SVC_API_TOKEN_FILE: '/run/creds/t' });
  });

  it('lets the Control Plane read its token from SVC_CONTROL_TOKEN_FILE, and refuses an empty or missing one', () => {
    const file = join(home, 'control-token');
    writeFileSync(file, 'tok-123\n');
    assert.equal(resolveControlSettings({ HOME: home, SVC_CONTROL_TOKEN_FILE: file }, {}).token, 'tok-123');
    writeFileSync(file, '\n');
    assert.throws(() => resolveControlSettings({ HOME: home, SVC_CONTROL_TOKEN_FILE: file }, {}), /empty/);
    assert.throws(() => resolveControlSettings({ HOME: home, SVC_CONTROL_TOKEN_FILE: join(home, 'none') }, {}), /could not be read/);
  });
});
