// Managed checkouts: a clone= repository's job runs in its own checkout of the freshly fetched
// default branch, made from a mirror under the trigger's state folder; a failed fetch fails the job with git's reason
// and the next job fetches again; fetches of one repository never overlap; the token goes to the origin host only,
// through GIT_ASKPASS. Origins are real bare repositories (file://) and a loopback git smart-HTTP host.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { createServer, type Socket } from 'node:net';
import { DatabaseSync } from 'node:sqlite';
import { createManagedCheckouts, managedDir } from '../../src/trigger/managed-checkout.ts';
import { ManagedGitError } from '../../src/trigger/managed-checkout.ts';
import type { ServedRepo } from '../../src/trigger/served-repos-file.ts';
import { createLogger } from '../../src/log.ts';
import {
  SECRETS, chataFormHeaders, fixture, get, post, startTestTrigger, tempDir, withJson, type TestTrigger,
} from './helpers.ts';
import { sign } from './helpers.ts';
import { startGitHttpsHost, basicPassword, type GitHttpsHost } from '../helpers/git-https-host.ts';
import { waitFor } from '../helpers/wait-for.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
const GIT_ENV = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
const TOKEN = 'mc-github-token-7d21f0';

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** An origin `<root>/<owner>/<name>.git` whose default branch is `trunk`, and a work clone that pushes to it. */
function makeOrigin(root: string, name: string): { bare: string; work: string; commit: (text: string) => string } {
  const bare = join(root, `${name}.git`);
  mkdirSync(bare, { recursive: true });
  git(bare, 'init', '-q', '--bare', '-b', 'trunk');
  const work = join(root, 'work', name);
  mkdirSync(work, { recursive: true });
  git(work, 'init', '-q', '-b', 'trunk');
  git(work, 'remote', 'add', 'origin', bare);
  const commit = (text: string): string => {
    mkdirSync(join(work, '.svc'), { recursive: true });
    writeFileSync(join(work, '.svc', 'policy.json'), JSON.stringify({ mark: text }));
    git(work, 'add', '-A');
    git(work, '-c', 'user.name=Ada', '-c', 'user.email=ada@example.test', 'commit', '-q', '-m', text);
    git(work, 'push', '-q', 'origin', 'HEAD:trunk');
    return git(work, 'rev-parse', 'HEAD');
  };
  commit('first');
  // Another branch with other files: a job must start from the default branch, not the newest push.
  git(work, 'checkout', '-q', '-b', 'feature');
  writeFileSync(join(work, 'feature.txt'), 'not on trunk\n');
  git(work, 'add', '-A');
  git(work, '-c', 'user.name=Ada', '-c', 'user.email=ada@example.test', 'commit', '-q', '-m', 'feature');
  git(work, 'push', '-q', 'origin', 'feature');
  git(work, 'checkout', '-q', 'trunk');
  return { bare, work, commit };
}

function served(name: string, clone: string): ServedRepo {
  const keys = { errtrack: [], trackera: [], trackerb: [], chata: [], chatb: [] };
  return { name, checkout: null, clone, keys, isDefault: false, line: 1 };
}

describe('a job of a clone= repository, through the trigger server', () => {
  let t: TestTrigger;
  let root: string;
  let web: ReturnType<typeof makeOrigin>;
  let webUrl: string;

  before(async () => {
    root = tempDir('svc-origins-');
    web = makeOrigin(join(root, 'acme'), 'web');
    makeOrigin(join(root, 'acme'), 'api');
    webUrl = `file://${web.bare}`;
    const file = join(root, 'repos.conf');
    // chata=*: a chat message may start work in acme/web (the chat job below).
    writeFileSync(file, `acme/web clone=${webUrl} default chata=*\n` +
      `acme/api clone=file://${join(root, 'acme', 'api.git')}\n`);
    t = await startTestTrigger({}, { reposFile: file });
  });
  after(async () => {
    await t.cleanup();
    rmSync(root, { recursive: true, force: true });
  });

  let n = 0;
  async function job(repo: string): Promise<Record<string, unknown>> {
    const brief = `fix the redirect ${++n}`;
    const res = await post(`${t.url}/jobs`, JSON.stringify({ brief, repo }), bearer);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const id = res.body.job_id as string;
    return waitFor(async () => {
      const body = (await get(`${t.url}/jobs/${id}`, bearer)).body;
      return body.status !== 'queued' && body.status !== 'running' ? body : null;
    }, `job ${id} to finish`);
  }

  function checkoutOf(id: string): string {
    // Outside ~/.svc: the run's agent must see its checkout's git metadata, and no sandbox shows ~/.svc.
    return join(t.home, '.local', 'share', 'svc', 'checkouts', 'acme', 'web', id);
  }

  it('runs svc start in its own checkout of the fetched default branch, with the origin as its origin', async () => {
    const done = await job('acme/web');
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const id = done.id as string;
    const call = t.calls().find((c) => c.env.SVC_JOB_ID === id)!;
    assert.equal(call.cwd, checkoutOf(id));
    // The checkout is the job's own: no worktree of it, which would check its whole tree out a second time.
    assert.equal(call.args.includes('--worktree'), false);
    assert.equal(git(call.cwd, 'rev-parse', 'HEAD'), git(web.bare, 'rev-parse', 'refs/heads/trunk'));
    assert.equal(git(call.cwd, 'rev-parse', '--abbrev-ref', 'HEAD'), 'trunk');
    assert.equal(git(call.cwd, 'config', 'remote.origin.url'), webUrl);
    assert.equal(existsSync(join(call.cwd, 'feature.txt')), false);
    // The policy the run reads is the base commit's, not the server's working directory's.
    assert.deepEqual(JSON.parse(readFileSync(join(call.cwd, '.svc', 'policy.json'), 'utf8')), { mark: 'first' });
    assert.ok(readdirSync(join(call.cwd, '.svc', 'runs')).includes((done.run as { run: string }).run));
    // A job for acme/web never touched acme/api's folder.
    assert.equal(existsSync(join(t.home, '.svc', 'trigger', 'repos', 'acme', 'api')), false);
  });

  it('fetches before each job: a new commit is the next job\'s base, earlier checkouts untouched', async () => {
    const first = await job('acme/web');
    const before = git(checkoutOf(first.id as string), 'rev-parse', 'HEAD');
    const sha = web.commit('second');
    const next = await job('acme/web');
    assert.equal(next.status, 'succeeded', JSON.stringify(next));
    assert.equal(git(checkoutOf(next.id as string), 'rev-parse', 'HEAD'), sha);
    assert.deepEqual(JSON.parse(readFileSync(join(checkoutOf(next.id as string), '.svc', 'policy.json'), 'utf8')),
      { mark: 'second' });
    assert.equal(git(checkoutOf(first.id as string), 'rev-parse', 'HEAD'), before);
    // Each job's launcher starts in the spare while the origin is asked; next's was ended unread (the origin had
    // moved) and a fresh one started in the fetched checkout: one launch of each went on, with its word.
    for (const [id, base] of [[first.id, before], [next.id, sha]] as const) {
      const calls = t.calls().filter((c) => c.env.SVC_JOB_ID === id);
      assert.equal(calls.length, 1);
      assert.equal(git(calls[0]!.cwd, 'rev-parse', 'HEAD'), base);
      assert.deepEqual(calls[0]!.handed, { secrets: {} });
    }
  });

  it('hands a trackera delivery\'s snapshot from the intake folder to that job\'s checkout', async () => {
    const raw = withJson('linear-issue-update.json', (v) => (v.webhookTimestamp = Date.now()));
    const headers = { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) };
    const res = await post(`${t.url}/trackera`, raw, headers);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const id = res.body.job_id as string;
    const done = await waitFor(async () => {
      const body = (await get(`${t.url}/jobs/${id}`, bearer)).body;
      return body.status !== 'queued' && body.status !== 'running' ? body : null;
    }, `job ${id} to finish`);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const inbox = join(checkoutOf(id), '.svc', 'inbox', 'trackera');
    assert.deepEqual(readFileSync(join(inbox, 'jobs', `${id}.json`)), raw);
    assert.deepEqual(readFileSync(join(inbox, 'LIN-34.json')), raw);
    const intake = join(t.home, '.svc', 'trigger', 'repos', 'acme', 'web', '.svc', 'inbox', 'trackera');
    assert.equal(existsSync(join(intake, 'jobs', `${id}.json`)), false);
  });

  it('hands a chata job naming trackera:<id> no snapshot of that issue kept from a trackera delivery', async () => {
    const intake = join(t.home, '.svc', 'trigger', 'repos', 'acme', 'web', '.svc', 'inbox', 'trackera');
    mkdirSync(intake, { recursive: true });
    writeFileSync(join(intake, 'LIN-77.json'), '{"title":"a private team\'s issue"}');
    const raw = Buffer.from(fixture('slack-slash-command.txt').toString().replace('text=', 'text=trackera%3ALIN-77'));
    const res = await post(`${t.url}/chata`, raw, chataFormHeaders(raw));
    const id = /Queued job (\S+)\./.exec(String(res.body.text))?.[1];
    assert.ok(id, JSON.stringify(res.body));
    const done = await waitFor(async () => {
      const body = (await get(`${t.url}/jobs/${id}`, bearer)).body;
      return body.status !== 'queued' && body.status !== 'running' ? body : null;
    }, `job ${id} to finish`);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const call = t.calls().find((c) => c.env.SVC_JOB_ID === id)!;
    assert.equal(call.cwd, checkoutOf(id));
    assert.ok(call.args.includes('trackera:LIN-77'), JSON.stringify(call.args));
    assert.equal(existsSync(join(checkoutOf(id), '.svc', 'inbox', 'trackera', 'LIN-77.json')), false);
    assert.equal(existsSync(join(intake, 'LIN-77.json')), true, 'the snapshot stays for the tracker\'s own jobs');
  });

  it('stages the snapshot of a repository\'s first delivery, before any job made its intake folder', async () => {
    const file = join(root, 'repos-fresh.conf');
    writeFileSync(file, `acme/web clone=${webUrl} default\n`);
    const fresh = await startTestTrigger({}, { reposFile: file });
    try {
      const raw = withJson('linear-issue-update.json', (v) => (v.webhookTimestamp = Date.now()));
      const headers = { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) };
      const res = await post(`${fresh.url}/trackera`, raw, headers);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      assert.equal(fresh.logs.some((l) => l.msg === 'trackera snapshot not staged'), false);
      const id = res.body.job_id as string;
      const done = await waitFor(async () => {
        const body = (await get(`${fresh.url}/jobs/${id}`, bearer)).body;
        return body.status !== 'queued' && body.status !== 'running' ? body : null;
      }, `job ${id} to finish`);
      assert.equal(done.status, 'succeeded', JSON.stringify(done));
      const checkout = join(fresh.home, '.local', 'share', 'svc', 'checkouts', 'acme', 'web', id);
      assert.deepEqual(readFileSync(join(checkout, '.svc', 'inbox', 'trackera', 'jobs', `${id}.json`)), raw);
    } finally {
      await fresh.cleanup();
    }
  });

  it('fails a job whose fetch fails with the reason, and the next job fetches again', async () => {
    const away = `${web.bare}.away`;
    renameSync(web.bare, away);
    let failed: Record<string, unknown>;
    try {
      failed = await job('acme/web');
    } finally {
      renameSync(away, web.bare);
    }
    assert.equal(failed.status, 'failed');
    assert.match(String(failed.error), /^Could not reach acme\/web from file:\/\/.*web\.git: /);
    assert.equal(t.calls().some((c) => c.env.SVC_JOB_ID === failed.id), false, 'nothing was launched');
    assert.equal(existsSync(checkoutOf(failed.id as string)), false);
    const sha = web.commit('third');
    const next = await job('acme/web');
    assert.equal(next.status, 'succeeded', JSON.stringify(next));
    assert.equal(git(checkoutOf(next.id as string), 'rev-parse', 'HEAD'), sha);
  });
});

// A `git` on PATH that logs every argv and notes when two fetches run at once (a fetch lasts at least 300 ms here,
// so overlapping ones cannot miss each other).
const GIT_WRAPPER = `#!/bin/sh
printf '%s\\n' "$*" >> "$GITWRAP_LOG/argv"
case " $* " in
  *" fetch "*)
    mkdir "$GITWRAP_LOG/fetching" 2>/dev/null || echo overlap >> "$GITWRAP_LOG/overlaps"
    sleep 0.3
    "$REAL_GIT" "$@"; rc=$?
    rmdir "$GITWRAP_LOG/fetching" 2>/dev/null
    exit $rc ;;
esac
exec "$REAL_GIT" "$@"
`;

function wrappedGit(dir: string): { env: NodeJS.ProcessEnv; log: string } {
  const bin = join(dir, 'bin');
  const log = join(dir, 'gitlog');
  mkdirSync(bin, { recursive: true });
  mkdirSync(log, { recursive: true });
  writeFileSync(join(bin, 'git'), GIT_WRAPPER);
  chmodSync(join(bin, 'git'), 0o755);
  const realGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
  const env = { PATH: `${bin}:${process.env.PATH}`, HOME: dir, GITWRAP_LOG: log, REAL_GIT: realGit };
  return { env, log };
}

const quiet = createLogger('managed-test', () => {});

describe('a server stopped while a managed checkout\'s fetch hangs', () => {
  it('kills the fetch, stops at once, and leaves the job queued for the next start', async () => {
    // The origin: a loopback listener that accepts and never answers (git waits on its TLS handshake). It reads and
    // drops what git sends: a socket left paused with git's ClientHello unread never sees the end of the stream when
    // git is killed, so it stayed open (CLOSE-WAIT) whether git was killed or not.
    const sockets: Socket[] = [];
    const origin = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {}).resume();
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const port = (origin.address() as { port: number }).port;
    const root = tempDir('svc-hung-origin-');
    const file = join(root, 'repos.conf');
    writeFileSync(file, `acme/web clone=https://127.0.0.1:${port}/acme/web.git default\n`);
    const t = await startTestTrigger({}, { reposFile: file });
    try {
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'fix the redirect' }), bearer);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const id = res.body.job_id as string;
      await waitFor(async () => (sockets.length > 0 ? true : null), 'git to reach the origin');
      assert.equal((await get(`${t.url}/jobs/${id}`, bearer)).body.status, 'running');
      // The origin never answers, so a close that waited for the fetch would never end (the test's own time limit
      // fails it); one that killed git sees git's connection go. No clock: how fast is the bench's to measure.
      await t.close();
      await waitFor(() => sockets.every((socket) => socket.closed), 'the killed fetch\'s connection to close');
      const db = new DatabaseSync(join(t.home, 'trigger.db'), { readOnly: true });
      try {
        const row = db.prepare('SELECT status, started_at, workdir, error FROM jobs WHERE id = ?').get(id);
        assert.deepEqual({ ...row }, { status: 'queued', started_at: null, workdir: null, error: null });
      } finally {
        db.close();
      }
      assert.equal(t.calls().length, 0, 'nothing was launched');
      assert.equal(existsSync(join(t.home, '.local', 'share', 'svc', 'checkouts', 'acme', 'web', id)), false);
    } finally {
      for (const socket of sockets) socket.destroy();
      origin.close();
      rmSync(t.home, { recursive: true, force: true });
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('createManagedCheckouts', () => {

  it('fetches one repository one job at a time, and every concurrent job gets a sound checkout', async () => {
    const dir = tempDir('svc-managed-');
    const origin = makeOrigin(join(dir, 'origins'), 'web');
    const { env, log } = wrappedGit(dir);
    const stateDir = join(dir, 'state');
    const managed = createManagedCheckouts({ stateDir, checkoutsDir: join(stateDir, '..', 'checkouts'), env, log: quiet });
    const repo = served('acme/web', `file://${origin.bare}`);
    const ids = ['j1', 'j2', 'j3', 'j4'];
    const paths = await Promise.all(ids.map((id) => managed.prepare(repo, { id, origin: 'jobs', args: [] })));
    const sha = git(origin.bare, 'rev-parse', 'refs/heads/trunk');
    for (const path of paths) assert.equal(git(path, 'rev-parse', 'HEAD'), sha);
    const fetches = readFileSync(join(log, 'argv'), 'utf8').split('\n').filter((l) => / fetch /.test(` ${l} `));
    assert.equal(fetches.length, 4, 'each job fetched');
    assert.equal(existsSync(join(log, 'overlaps')), false, 'no two fetches of one repository overlapped');
    git(join(managedDir(stateDir, repo), 'mirror.git'), 'fsck', '--no-progress');
    await managed.idle();
  });

  it('uses the checkout made ahead while the origin is unchanged; it holds nothing of an earlier job', async () => {
    const dir = tempDir('svc-managed-');
    const origin = makeOrigin(join(dir, 'origins'), 'web');
    const { env, log } = wrappedGit(dir);
    const url = `file://${origin.bare}`;
    const co = join(dir, 'co');
    const managed = createManagedCheckouts({ stateDir: join(dir, 'state'), checkoutsDir: co, env, log: quiet });
    const repo = served('acme/web', url);
    const fetches = () => readFileSync(join(log, 'argv'), 'utf8').split('\n').filter((l) => / fetch /.test(` ${l} `));
    const first = await managed.prepare(repo, { id: 'j1', origin: 'jobs', args: [] });
    // What a run may leave in its own checkout: untracked files, a changed tracked file, a hook, a config setting.
    mkdirSync(join(first, '.svc', 'runs', 'r1'), { recursive: true });
    writeFileSync(join(first, 'left.txt'), 'from job 1\n');
    writeFileSync(join(first, '.svc', 'policy.json'), '{"mark":"job 1"}');
    writeFileSync(join(first, '.git', 'hooks', 'post-checkout'), '#!/bin/sh\ntouch "$HOME/hooked"\n', { mode: 0o755 });
    git(first, 'config', 'core.hooksPath', join(dir, 'hooks'));
    function assertFresh(path: string, sha: string, mark: string): void {
      assert.equal(git(path, 'rev-parse', 'HEAD'), sha);
      assert.equal(git(path, 'rev-parse', '--abbrev-ref', 'HEAD'), 'trunk');
      assert.equal(git(path, 'status', '--porcelain', '--ignored', '--untracked-files=all'), '');
      assert.deepEqual(JSON.parse(readFileSync(join(path, '.svc', 'policy.json'), 'utf8')), { mark });
      assert.equal(existsSync(join(path, '.git', 'hooks', 'post-checkout')), false);
      assert.equal(spawnSync('git', ['config', '--local', 'core.hooksPath'], { cwd: path, env: GIT_ENV }).status, 1);
      assert.equal(git(path, 'config', 'remote.origin.url'), url);
    }
    const second = await managed.prepare(repo, { id: 'j2', origin: 'jobs', args: [] });
    assertFresh(second, git(origin.bare, 'rev-parse', 'refs/heads/trunk'), 'first');
    assert.equal(fetches().length, 1, 'the origin answered as before: the checkout made ahead, nothing fetched');
    const sha = origin.commit('second');
    const third = await managed.prepare(repo, { id: 'j3', origin: 'jobs', args: [] });
    assertFresh(third, sha, 'second');
    assert.equal(fetches().length, 2, 'the origin moved: fetched');
    // A branch other than the default moved: the checkout made ahead is not that answer's either.
    git(origin.work, 'push', '-q', 'origin', 'trunk:feature', '--force');
    const fourth = await managed.prepare(repo, { id: 'j4', origin: 'jobs', args: [] });
    assertFresh(fourth, sha, 'second');
    assert.equal(fetches().length, 3);
    assert.equal(git(fourth, 'rev-parse', 'refs/remotes/origin/feature'), sha);
    assert.equal(existsSync(join(dir, 'hooked')), false);
    assert.deepEqual(readdirSync(join(co, 'acme', 'web')).sort(), ['.next', 'j1', 'j2', 'j3', 'j4']);
    await managed.idle();
  });

  it('starts a job\'s launch in the checkout made ahead while the origin is asked; one the origin moved past is ended '
    + 'before its folder is written, and the job gets the origin\'s commit', async () => {
    const dir = tempDir('svc-managed-');
    const origin = makeOrigin(join(dir, 'origins'), 'web');
    const { env } = wrappedGit(dir);
    const co = join(dir, 'co');
    const managed = createManagedCheckouts({ stateDir: join(dir, 'state'), checkoutsDir: co, env, log: quiet });
    const repo = served('acme/web', `file://${origin.bare}`);
    await managed.prepare(repo, { id: 'j1', origin: 'jobs', args: [] });
    const spareSha = git(origin.bare, 'rev-parse', 'refs/heads/trunk');
    // What a held launch could see: its folder's commit when it started and when it was ended.
    const told: Array<{ path: string; sha: string; ended: string | null }> = [];
    const early = (path: string) => {
      const launch = { path, sha: git(path, 'rev-parse', 'HEAD'), ended: null as string | null };
      told.push(launch);
      return async () => {
        launch.ended = git(path, 'rev-parse', 'HEAD');
      };
    };
    const second = await managed.prepare(repo, { id: 'j2', origin: 'jobs', args: [] }, undefined, early);
    assert.deepEqual(told, [{ path: second, sha: spareSha, ended: null }], 'the same answer: the launch stands');
    const moved = origin.commit('moved');
    const third = await managed.prepare(repo, { id: 'j3', origin: 'jobs', args: [] }, undefined, early);
    // Started in the spare (the answer unknown yet), ended while the folder still held only the spare's commit.
    assert.deepEqual(told[1], { path: third, sha: spareSha, ended: spareSha });
    assert.equal(git(third, 'rev-parse', 'HEAD'), moved);
    assert.deepEqual(JSON.parse(readFileSync(join(third, '.svc', 'policy.json'), 'utf8')), { mark: 'moved' });
    assert.equal(git(third, 'status', '--porcelain', '--ignored', '--untracked-files=all'), '');
    // An origin that cannot be reached: the held launch is ended and its folder removed, as the job fails.
    renameSync(origin.bare, `${origin.bare}.gone`);
    await assert.rejects(managed.prepare(repo, { id: 'j4', origin: 'jobs', args: [] }, undefined, early), ManagedGitError);
    assert.deepEqual(told[2], { path: join(co, 'acme', 'web', 'j4'), sha: moved, ended: moved });
    assert.equal(existsSync(join(co, 'acme', 'web', 'j4')), false);
    // Its spare was kept: the next job, the origin back, starts in it at once and it stands (nothing fetched).
    renameSync(`${origin.bare}.gone`, origin.bare);
    const fifth = await managed.prepare(repo, { id: 'j5', origin: 'jobs', args: [] }, undefined, early);
    assert.deepEqual(told[3], { path: fifth, sha: moved, ended: null });
    await managed.idle();
  });

  it('hands over the checkout made ahead with an index git trusts: the job\'s git status reads no file again',
    async () => {
      const dir = tempDir('svc-managed-');
      const origin = makeOrigin(join(dir, 'origins'), 'web');
      const co = join(dir, 'co');
      const managed = createManagedCheckouts({
        stateDir: join(dir, 'state'), checkoutsDir: co, env: GIT_ENV, log: quiet,
      });
      const repo = served('acme/web', `file://${origin.bare}`);
      await managed.prepare(repo, { id: 'j1', origin: 'jobs', args: [] });
      // git re-reads (and hashes) a tracked file whose time is not older than its index's second ("racily clean").
      const second = (ms: number) => Math.floor(ms / 1000);
      const racy = (path: string): string[] => {
        const index = second(statSync(join(path, '.git', 'index')).mtimeMs);
        const files = git(path, 'ls-files', '-z').split('\0').filter(Boolean);
        return files.filter((f) => second(lstatSync(join(path, f)).mtimeMs) >= index);
      };
      const spare = join(co, 'acme', 'web', '.next');
      await waitFor(() => (existsSync(join(spare, '.git', 'index')) && racy(spare).length === 0 ? true : null),
        'the spare\'s index to be written after its files\' second', 30_000);
      const path = await managed.prepare(repo, { id: 'j2', origin: 'jobs', args: [] });
      assert.deepEqual(racy(path), []);
      const index = statSync(join(path, '.git', 'index')).mtimeMs;
      assert.equal(git(path, 'status', '--porcelain', '--untracked-files=all'), '');
      assert.equal(statSync(join(path, '.git', 'index')).mtimeMs, index, 'git status had nothing to write');
      await managed.idle();
    });

  describe('security: links the repository commits under .svc/inbox', () => {
    /** An origin whose trunk commits `link` → `target`, a manager, and job j1's trackera delivery in its intake. */
    function withCommittedLink(link: string[], target: string, log = quiet) {
      const dir = tempDir('svc-managed-');
      const origin = makeOrigin(join(dir, 'origins'), 'web');
      mkdirSync(join(origin.work, ...link.slice(0, -1)), { recursive: true });
      symlinkSync(target, join(origin.work, ...link));
      origin.commit('a link');
      const stateDir = join(dir, 'state');
      const managed = createManagedCheckouts({ stateDir, checkoutsDir: join(dir, 'co'), env: GIT_ENV, log });
      const repo = served('acme/web', `file://${origin.bare}`);
      const intake = join(managedDir(stateDir, repo), '.svc', 'inbox', 'trackera');
      mkdirSync(join(intake, 'jobs'), { recursive: true });
      writeFileSync(join(intake, 'LIN-34.json'), '{"newest":true}');
      writeFileSync(join(intake, 'jobs', 'j1.json'), '{"own":true}');
      return { dir, managed, repo, intake };
    }

    it('hands the snapshot over in place of a committed link, never writing the host file it names', async () => {
      const victim = join(tempDir('svc-victim-'), 'victim.txt');
      writeFileSync(victim, 'operator data\n');
      const { managed, repo } = withCommittedLink(['.svc', 'inbox', 'trackera', 'LIN-34.json'], victim);
      const path = await managed.prepare(repo, { id: 'j1', origin: 'trackera', args: ['start', 'trackera:LIN-34'] });
      assert.equal(readFileSync(victim, 'utf8'), 'operator data\n');
      const inbox = join(path, '.svc', 'inbox', 'trackera');
      assert.equal(lstatSync(join(inbox, 'LIN-34.json')).isFile(), true);
      assert.equal(readFileSync(join(inbox, 'LIN-34.json'), 'utf8'), '{"newest":true}');
      assert.equal(readFileSync(join(inbox, 'jobs', 'j1.json'), 'utf8'), '{"own":true}');
      await managed.idle();
    });

    for (const linked of [['.svc', 'inbox'], ['.svc', 'inbox', 'trackera'], ['.svc', 'inbox', 'trackera', 'jobs']]) {
      it(`runs the job without the snapshot rather than write through a committed link at ${linked.join('/')}, ` +
        'saying why', async () => {
        const outside = tempDir('svc-outside-');
        const lines: Array<Record<string, unknown>> = [];
        const log = createLogger('managed-test', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
        const { managed, repo, intake } = withCommittedLink(linked, outside, log);
        const path = await managed.prepare(repo, { id: 'j1', origin: 'trackera', args: ['start', 'trackera:LIN-34'] });
        assert.equal(existsSync(path), true, 'the job has its checkout');
        assert.deepEqual(readdirSync(outside, { recursive: true }), []);
        const warned = lines.find((l) => l.msg === 'trackera snapshot not staged');
        assert.equal(warned?.job_id, 'j1');
        assert.match(String(warned?.error), new RegExp(`/${linked.join('/')}": it is a symbolic link, not a plain`));
        assert.equal(existsSync(join(intake, 'jobs', 'j1.json')), false, 'the job\'s own delivery is not left behind');
        await managed.idle();
      });
    }
  });

  describe('the token', () => {
    let dir: string;
    let host: GitHttpsHost;
    let env: NodeJS.ProcessEnv;
    let log: string;
    let stateDir: string;

    before(async () => {
      dir = tempDir('svc-managed-token-');
      makeOrigin(join(dir, 'origins', 'acme'), 'web');
      // One certificate for 127.0.0.1 (the token's host) and localhost (another host name for the same server).
      execFileSync('openssl', [
        'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=127.0.0.1',
        '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-days', '1',
        '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
      ], { stdio: 'ignore' });
      const cert = { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
      host = await startGitHttpsHost({ root: join(dir, 'origins'), ...cert, password: TOKEN });
      const wrapped = wrappedGit(dir);
      log = wrapped.log;
      env = {
        ...wrapped.env, GITHUB_TOKEN: TOKEN, GITHUB_API_URL: `${host.url}/api/v3`,
        GIT_SSL_CAINFO: join(dir, 'cert.pem'),
      };
      stateDir = join(dir, 'state');
    });
    after(() => host.close());

    it('goes to the origin host through GIT_ASKPASS, never into argv, a URL or a file', async () => {
      const managed = createManagedCheckouts({ stateDir, checkoutsDir: join(stateDir, '..', 'checkouts'), env, log: quiet });
      const repo = served('acme/web', `${host.url}/acme/web.git`);
      const path = await managed.prepare(repo, { id: 'j1', origin: 'jobs', args: [] });
      assert.equal(git(path, 'rev-parse', '--abbrev-ref', 'HEAD'), 'trunk');
      assert.ok(host.requests.some((r) => basicPassword(r.authorization) === TOKEN), 'the origin got the token');
      await managed.idle();
      assert.doesNotMatch(readFileSync(join(log, 'argv'), 'utf8'), new RegExp(TOKEN));
      const stored = spawnSync('grep', ['-rl', TOKEN, stateDir], { encoding: 'utf8' });
      assert.equal(stored.status, 1, `the token is in ${stored.stdout}`);
    });

    it('is not offered to another host: that fetch fails with git\'s reason and nothing is made', async () => {
      const managed = createManagedCheckouts({ stateDir, checkoutsDir: join(stateDir, '..', 'checkouts'), env, log: quiet });
      const seen = host.requests.length;
      const repo = served('acme/other', `${host.url.replace('127.0.0.1', 'localhost')}/acme/web.git`);
      await assert.rejects(managed.prepare(repo, { id: 'j2', origin: 'jobs', args: [] }), (err: unknown) => {
        assert.ok(err instanceof ManagedGitError);
        assert.match(err.message, /^Could not reach acme\/other from https:\/\/localhost:\d+\/acme\/web\.git: /);
        return true;
      });
      const later = host.requests.slice(seen);
      assert.ok(later.length > 0, 'git did ask the other host');
      assert.deepEqual(later.filter((r) => r.authorization !== null), []);
      assert.equal(existsSync(join(stateDir, '..', 'checkouts', 'acme', 'web', 'j2')), false);
    });
  });
});
