import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHATA_TEAM, SECRETS, FAKE_SVC, post, get, makeRepo, tempDir, fixture, nowSeconds, sign } from './helpers.ts';
import { makeCert, startStandIn } from './standins.ts';
import { DatabaseSync } from 'node:sqlite';
import { waitFor } from '../helpers/wait-for.ts';
import { killGroup, pidIn } from '../helpers/pid-file.ts';
import { processAlive } from '../engine/fixtures.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
const children: ChildProcess[] = [];
const cleanups: Array<() => void> = [];

after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const fn of cleanups) fn();
});

function serve(env: NodeJS.ProcessEnv, args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [CLI, 'trigger', 'serve', '--port', '0', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = /^(http:\/\/\S+)\n/.exec(out);
      if (line) resolve({ child, url: line[1]! });
    });
    child.on('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
}

/** What `svc trigger serve --repo REPO` logs on stderr up to its "listening" line; it is stopped then. */
async function startupLog(env: NodeJS.ProcessEnv, repo: string): Promise<string> {
  const child = spawn(process.execPath, [CLI, 'trigger', 'serve', '--port', '0', '--repo', repo],
    { env, stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  let err = '';
  const exit = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      if (err.includes('"msg":"listening"')) resolve();
    });
    exit.then(() => reject(new Error(`server exited before listening: ${err}`)));
  });
  child.kill('SIGTERM');
  await exit;
  return err;
}

function baseEnv(home: string): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: home, ...SECRETS, CHATA_TEAM_IDS: CHATA_TEAM, SVC_TRIGGER_CLI: FAKE_SVC };
}

describe('svc trigger', () => {
  it('prints help with exit 0 and refuses a bad concurrency with exit 2', () => {
    const help = spawnSync(process.execPath, [CLI, 'trigger', 'serve', '--help'],
      { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: tempDir() } });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /^Usage: svc trigger serve/);
    const bad = spawnSync(process.execPath, [CLI, 'trigger', 'serve', '--concurrency', '0'], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: tempDir() } });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--concurrency must be an integer/);
  });

  it('refuses with exit 2 to serve a checkout that is missing or not a git work tree (as a repositories file)', () => {
    const home = tempDir('svc-home-');
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    const env = { PATH: process.env.PATH, HOME: home, SVC_API_TOKEN: SECRETS.SVC_API_TOKEN };
    const serve = (args: string[], cwd?: string) => spawnSync(process.execPath,
      [CLI, 'trigger', 'serve', '--port', '0', ...args], { encoding: 'utf8', env, cwd, timeout: 20_000 });
    const missing = serve(['--repo', join(home, 'nowhere')]);
    assert.equal(missing.status, 2, missing.stderr);
    assert.match(missing.stderr, /Cannot serve --repo .*nowhere: checkout .*nowhere is not a directory/);
    const plain = serve([], home);
    assert.equal(plain.status, 2, plain.stderr);
    assert.match(plain.stderr, /Cannot serve the current directory .*: checkout .* is not a git work tree\. Serve a git /);
    assert.match(plain.stderr, /with --repo DIR, or repositories with --repos FILE \(svc repos add OWNER\/NAME checkout=DIR/);
    const repo = makeRepo();
    cleanups.push(() => rmSync(repo, { recursive: true, force: true }));
    mkdirSync(join(repo, 'sub'));
    const sub = serve(['--repo', join(repo, 'sub')]);
    assert.equal(sub.status, 2, sub.stderr);
    assert.match(sub.stderr, /: checkout .*sub is not the top of a git work tree \(its top is \//);
  });

  it('prints its real URL, serves /health, and exits 0 on SIGTERM', async () => {
    const home = tempDir('svc-home-');
    const repo = makeRepo();
    cleanups.push(
      () => rmSync(home, { recursive: true, force: true }), () => rmSync(repo, { recursive: true, force: true }),
    );
    const { child, url } = await serve(baseEnv(home), ['--repo', repo]);
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(url, 'http://127.0.0.1:0');
    assert.deepEqual((await get(`${url}/health`)).body, { status: 'ok' });
    assert.ok(existsSync(join(home, '.svc', 'trigger', 'trigger.db')));
    const code = await new Promise<number | null>((r) => {
      child.on('exit', (c) => r(c));
      child.kill('SIGTERM');
    });
    assert.equal(code, 0);
  });

  it('says at start that trackera and trackerb take no /svc answer without the API access to check who answers',
    async () => {
      const home = tempDir('svc-home-');
      const repo = makeRepo();
      cleanups.push(
        () => rmSync(home, { recursive: true, force: true }), () => rmSync(repo, { recursive: true, force: true }),
      );
      const bare = await startupLog(baseEnv(home), repo);
      assert.match(bare, /"TRACKERA_API_KEY is not set: \/trackera refuses every \/svc answer comment \(/);
      assert.match(bare, /"TRACKERB_BASE_URL, TRACKERB_EMAIL and TRACKERB_API_TOKEN are not all set: \/trackerb /);
      const keyed = await startupLog({ ...baseEnv(home), TRACKERA_API_KEY: 'lin-key', TRACKERB_EMAIL: 'svc@example.test',
        TRACKERB_BASE_URL: 'https://acme.atlassian.example', TRACKERB_API_TOKEN: 'jira-token' }, repo);
      assert.doesNotMatch(keyed, /TRACKERA_API_KEY is not set|are not all set/);
      assert.match(keyed, /"msg":"listening"/);
      // Every setting there, but an address refused (logged as an error, the server still starts): not "not set".
      const refused = await startupLog({ ...baseEnv(home), TRACKERA_API_KEY: 'lin-key',
        TRACKERA_API_URL: 'http://127.0.0.1:9/graphql', TRACKERB_EMAIL: 'svc@example.test',
        TRACKERB_BASE_URL: 'http://127.0.0.1:9', TRACKERB_API_TOKEN: 'jira-token' }, repo);
      assert.doesNotMatch(refused, /TRACKERA_API_KEY is not set|are not all set/);
      assert.match(refused, /"TRACKERA_API_URL is not an https URL: \/trackera refuses every \/svc answer comment \(/);
      assert.match(refused, /"TRACKERB_BASE_URL is not an https URL: \/trackerb refuses every \/svc answer comment \(/);
    });

  it('runs a job accepted just before a SIGKILL once the server restarts, and again one whose launch it lost',
    async () => {
    const home = tempDir('svc-home-');
    const repo = makeRepo();
    cleanups.push(() => rmSync(home, { recursive: true, force: true }), () => rmSync(repo, { recursive: true, force: true }));
    const env = baseEnv(home);
    const args = ['--repo', repo, '--concurrency', '1'];
    const first = await serve(env, args);
    // Occupy the only slot with a launcher that never returns, so the next job is certainly still queued.
    const blocker = await post(`${first.url}/jobs`, JSON.stringify({ brief: 'hang-forever' }), bearer);
    const pidFile = join(home, 'fake-svc', 'hang.pid');
    // Read the pid now: the cleanup that removes HOME runs before this one would.
    const hangPid = await waitFor(() => pidIn(pidFile), 'the blocking launcher');
    cleanups.push(() => killGroup(hangPid));
    const accepted = await post(`${first.url}/jobs`, JSON.stringify({ brief: 'after the crash' }), bearer);
    assert.equal(accepted.status, 202);
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));

    // Two slots now: the blocker, queued again and older, would take the only one and hang again.
    const second = await serve(env, ['--repo', repo, '--concurrency', '2']);
    const id = accepted.body.job_id as string;
    const done = await waitFor(async () => {
      const j = (await get(`${second.url}/jobs/${id}`, bearer)).body;
      return j.status === 'succeeded' ? j : null;
    }, 'the accepted job to run after restart');
    assert.deepEqual(done.args, ['start', '--brief', 'after the crash', '--detach']);
    // Its launcher, lost with the first server, was ended by the second: no run it makes later goes on unwatched.
    await waitFor(() => !processAlive(hangPid), 'the lost launcher to be ended');
    // It made no run and is known gone, so no agent ran: the same job is launched again, and says why.
    const again = await waitFor(() => {
      const pid = pidIn(pidFile);
      return pid !== null && pid !== hangPid ? pid : null;
    }, 'the blocker to be launched again');
    cleanups.push(() => killGroup(again));
    const requeued = (await get(`${second.url}/jobs/${blocker.body.job_id as string}`, bearer)).body;
    assert.deepEqual([requeued.status, requeued.requeues], ['running', 1]);
    assert.match(String(requeued.error), /^queued again: the server stopped during its launch, whose run local\/r\w+ /);
    assert.equal(done.requeues, 0, 'a job that never launched is only run, not counted');
    second.child.kill('SIGTERM');
  });

  it('follows to its end the run a launch was making when the server was SIGKILLed, once it restarts', async () => {
    const home = tempDir('svc-home-');
    const repo = makeRepo();
    cleanups.push(() => rmSync(home, { recursive: true, force: true }), () => rmSync(repo, { recursive: true, force: true }));
    // A slow agent: it says it started, then works until the test releases it (a file in its worktree).
    const agent = 'touch started; while [ ! -f release ]; do sleep 0.05; done; echo done > done.txt';
    const config = { provider: 'slow', providers: { slow: { command: ['sh', '-c', agent] } } };
    writeFileSync(join(repo, '.svc', 'config.json'), JSON.stringify(config));
    // A Control Plane that holds what is sent to it until the server is killed: the launcher, which sends its new run
    // before it exits (src/cli/start.ts), is still running then.
    const held: ServerResponse[] = [];
    let holding = true;
    const control = createServer((req, res) => {
      req.resume();
      if (holding) held.push(res);
      else res.writeHead(503).end();
    });
    await new Promise<void>((r) => control.listen(0, '127.0.0.1', r));
    cleanups.push(() => control.close());
    const env = {
      ...baseEnv(home), SVC_TRIGGER_CLI: CLI,
      SVC_CONTROL_URL: `http://127.0.0.1:${(control.address() as AddressInfo).port}`,
    };
    const args = ['--repo', repo, '--concurrency', '1'];
    const first = await serve(env, args);
    const accepted = await post(`${first.url}/jobs`, JSON.stringify({ brief: 'slow work' }), bearer);
    assert.equal(accepted.status, 202);
    const runs = join(repo, '.svc', 'runs');
    const stateOf = (run: string): Record<string, unknown> | null => {
      try {
        return JSON.parse(readFileSync(join(runs, run, 'state.json'), 'utf8')) as Record<string, unknown>;
      } catch {
        return null;
      }
    };
    // Its worker started (its pid recorded): the launcher prints the run and sends it on, then exits.
    const listed = () => (existsSync(runs) ? readdirSync(runs) : []);
    const run = await waitFor(() => listed().find((r) => stateOf(r)?.pid), 'the worker');
    // Should the test fail before it releases the agent, the worker stops it (before the repository is removed).
    const worker = stateOf(run)!.pid as number;
    cleanups.unshift(() => {
      // Gone in the meantime (ESRCH) must not skip the cleanups after this one.
      try {
        process.kill(-worker, 'SIGCONT');
        process.kill(-worker, 'SIGTERM');
      } catch {}
    });
    // Held where a loaded machine may leave it, recorded by its launcher but its worktree not made yet, until the
    // server has restarted; the release below then waits for the agent in that worktree (written at once, it could
    // meet no worktree yet: ENOENT under load).
    process.kill(worker, 'SIGSTOP');
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    holding = false;
    for (const res of held) res.destroy();

    const second = await serve(env, args);
    cleanups.push(() => second.child.kill('SIGTERM'));
    const id = accepted.body.job_id as string;
    const job = async () => (await get(`${second.url}/jobs/${id}`, bearer)).body;
    const following = await job();
    assert.equal(following.status, 'running', String(following.error));
    assert.deepEqual(following.run, { source: 'local', run });
    process.kill(worker, 'SIGCONT');
    // The worker makes the worktree, and only later the agent starts in it.
    const worktree = join(repo, '.svc', 'worktrees', run);
    await waitFor(() => existsSync(join(worktree, 'started')), 'the agent to start');
    writeFileSync(join(worktree, 'release'), '');
    const done = await waitFor(async () => {
      const j = await job();
      return j.status !== 'running' ? j : null;
    }, 'the job to end with its run');
    assert.equal(done.status, 'succeeded', String(done.error));
    assert.deepEqual(done.run, { source: 'local', run });
    assert.equal(stateOf(run)?.status, 'succeeded');
  });

  it('sends a completion summary it may have delivered once more after a SIGKILL, saying it may be a repeat',
    async () => {
    const home = tempDir('svc-home-');
    const repo = makeRepo();
    const certDir = tempDir('svc-cert-');
    for (const dir of [home, repo, certDir]) cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const cert = makeCert(certDir);
    const hooks = await startStandIn(cert);
    try {
      const env = {
        ...baseEnv(home), CHATA_HOOKS_PREFIX: `${hooks.url}/commands/`,
        NODE_EXTRA_CA_CERTS: join(certDir, 'cert.pem'),
      };
      const args = ['--repo', repo];
      const first = await serve(env, args);
      // The vendor takes the summary and the server dies before it hears back: between a send and its record.
      hooks.respond = () => {
        first.child.kill('SIGKILL');
        return null;
      };
      const raw = Buffer.from(fixture('slack-slash-command.txt').toString().replace('text=', 'text=fix+it')
        .replace(/response_url=[^&]+/, `response_url=${encodeURIComponent(`${hooks.url}/commands/T1/123/abc`)}`));
      const ts = String(nowSeconds());
      const asked = await post(`${first.url}/chata`, raw, { 'content-type': 'application/x-www-form-urlencoded',
        'x-chata-request-timestamp': ts, 'x-chata-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts) });
      const id = /(j\w{26})/.exec(asked.body.text as string)![1]!;
      await new Promise((r) => first.child.once('exit', r));
      assert.equal(hooks.requests.length, 1, 'the summary reached the vendor once before the crash');
      hooks.respond = () => ({ status: 200, body: 'ok' });

      const second = await serve(env, args);
      const again = await waitFor(() => hooks.requests[1], 'the summary after the restart');
      const first1 = JSON.parse(hooks.requests[0]!.body) as { text: string };
      const text = (JSON.parse(again.body) as { text: string }).text;
      assert.match(text, /^svc restarted while sending this summary: it may have arrived once already · /);
      assert.ok(text.endsWith(first1.text), 'the same summary, after the note');
      const db = new DatabaseSync(join(home, '.svc', 'trigger', 'trigger.db'), { readOnly: true });
      try {
        const status = db.prepare('SELECT notify_status FROM jobs WHERE id = ?');
        await waitFor(() => (status.get(id) as { notify_status: string | null }).notify_status === 'sent',
          'the summary recorded as sent');
      } finally {
        db.close();
      }
      second.child.kill('SIGTERM');
      await new Promise((r) => second.child.once('exit', r));
      assert.equal(hooks.requests.length, 2, 'sent twice in all: once cut off, once saying so');
    } finally {
      await hooks.close();
    }
  });
});
