// A setting with a value svc cannot use stops a server before it listens, with exit status 2 (the person must change
// what they set) and the variable named — wherever in start-up the setting happens to be read.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild } from '../helpers/run-child.ts';
import { serve, stop, type Served } from '../helpers/serve-cli.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { makeRepo, svcEnv } from '../engine/fixtures.ts';
import { prepareRun } from '../../src/engine/launch.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

describe('a bad setting', () => {
  const cases: Array<[string, string[], string]> = [
    ['control', ['control', 'serve', '--port', '0'], 'SVC_CONTROL_MAX_CONNECTIONS'],
    ['control', ['control', 'serve', '--port', '0'], 'SVC_CONTROL_MAX_STREAMS'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_TRIGGER_MAX_CONNECTIONS'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_TRIGGER_CONCURRENCY'],
    ['control', ['control', 'serve'], 'SVC_CONTROL_PORT'],
    ['control', ['control', 'serve', '--port', '0'], 'SVC_CONTROL_ALLOW_INSECURE_BIND'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_TRIGGER_EXECUTOR'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_TRIGGER_DEDUPE_DAYS'],
    // Read by every run it starts (to ship to the Control Plane), where a bad value would fail each one.
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_CONTROL_PORT'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_CONTROL_URL'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'GITHUB_API_URL'],
    ['control', ['control', 'serve', '--port', '0'], 'GITHUB_API_URL'],
  ];
  for (const [server, args, name] of cases) {
    it(`${name}=x stops the ${server} server with exit 2, naming the variable`, async () => {
      const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
      try {
        // The trigger server serves its current directory, which must be a git work tree.
        spawnSync('git', ['init', '-q', home]);
        const env = { PATH: process.env.PATH, HOME: home, [name]: 'x' };
        const r = await runChild(process.execPath, [CLI, ...args], { cwd: home, env });
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, new RegExp(name));
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    });
  }

  it('SVC_CONTROL_PORT=x stops a client (svc runs) and svc start, before a run is made, with exit 2', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
    try {
      spawnSync('git', ['init', '-q', home]);
      const env = { PATH: process.env.PATH, HOME: home, SVC_CONTROL_PORT: 'x' };
      for (const args of [['runs'], ['start', '--brief', 'x']]) {
        const r = await runChild(process.execPath, [CLI, ...args], { cwd: home, env });
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, /SVC_CONTROL_PORT/);
      }
      assert.equal(existsSync(join(home, '.svc', 'runs')), false, 'no run was made');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('SVC_CONTROL_URL that is no http(s) address stops svc runs with exit 2 naming it; an unreachable one exits 1',
    async () => {
      const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
      try {
        const run = (url: string) => runChild(process.execPath, [CLI, 'runs', 'list'],
          { cwd: home, env: { PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: url } });
        for (const url of ['notaurl', 'ftp://127.0.0.1:9', '127.0.0.1:9']) {
          const r = await run(url);
          assert.equal(r.code, 2, `${url}: ${r.stderr}`);
          assert.match(r.stderr, /SVC_CONTROL_URL must be/);
        }
        const closed = await run('http://127.0.0.1:9');
        assert.equal(closed.code, 1, closed.stderr);
        assert.match(closed.stderr, /no Control Plane answered at http:\/\/127\.0\.0\.1:9/);
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    });

  it('a refused SVC_CONTROL_URL or --url is shown without the credentials written into it', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
    try {
      const env = { PATH: process.env.PATH, HOME: home };
      const bad = 'https://ops:s3cret@token@cp.example.test:8443/svc';
      // Every command that reaches the Control Plane refuses it before it could print it anywhere else.
      const calls = [
        ['runs', 'list'], ['control', 'status'], ['control', 'import', home], ['dashboard'], ['start', '--brief', 'x'],
      ].map((args) => [args, { SVC_CONTROL_URL: bad }] as const);
      for (const [args, extra] of [...calls, [['runs', 'list', '--url', bad], {}]] as const) {
        const r = await runChild(process.execPath, [CLI, ...args], { cwd: home, env: { ...env, ...extra } });
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, /must be/);
        assert.equal(r.stderr.includes('s3cret') || r.stderr.includes('token@'), false, r.stderr);
        assert.match(r.stderr, /cp\.example\.test/, 'the address is still shown, its credentials left out');
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  // Node's URL parser reads user info from more than `scheme://user:password@`: it takes `\\` for `/` in an http(s)
  // URL, needs no slashes after `http:`, drops tabs and newlines, and a person may percent-encode the `:` or `@`.
  it('a refused SVC_CONTROL_URL or --url shows no credential in any spelling of its user info', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
    try {
      spawnSync('git', ['init', '-q', home]);
      const env = { PATH: process.env.PATH, HOME: home };
      const spellings = [
        'http://ops%3Ap4ss@127.0.0.1:1', 'http://ops:p4ss%40x@127.0.0.1:1', 'http://ops:p4ss%40127.0.0.1:1',
        'http:ops:p4ss@127.0.0.1:1', 'http:/\\ops:p4ss@127.0.0.1:1', 'HTTPS:\\\\ops:p4ss@127.0.0.1:1',
        'http://ops:p4ss\t@127.0.0.1:1', ' \x01http://ops:p4ss@127.0.0.1:1', 'ops:p4ss@127.0.0.1:1',
      ];
      for (const bad of spellings) {
        const calls = [[['runs', 'list'], { SVC_CONTROL_URL: bad }],
          [['start', '--brief', 'x'], { SVC_CONTROL_URL: bad }], [['runs', 'list', '--url', bad], {}]] as const;
        for (const [args, extra] of calls) {
          const r = await runChild(process.execPath, [CLI, ...args], { cwd: home, env: { ...env, ...extra } });
          assert.equal(r.code, 2, `${JSON.stringify(bad)} ${args[0]}: ${r.stderr}`);
          assert.match(r.stderr, /must be/);
          assert.equal(r.stderr.includes('p4ss'), false, r.stderr);
        }
      }
      assert.equal(existsSync(join(home, '.svc', 'runs')), false, 'no run was made');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  // Node's URL parser, and so fetch, refuses a zone id in an IPv6 literal: such an address could never be reached.
  it('SVC_CONTROL_URL with an IPv6 zone id exits 2 saying zone ids are not supported', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
    try {
      const r = await runChild(process.execPath, [CLI, 'runs', 'list'],
        { cwd: home, env: { PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: 'http://[fe80::1%25eth0]:47821' } });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /SVC_CONTROL_URL must be .*zone id/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('svc runs --url with no http(s) address exits 2 naming the flag', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
    try {
      const r = await runChild(process.execPath, [CLI, 'runs', 'list', '--url', 'notaurl'],
        { cwd: home, env: { PATH: process.env.PATH, HOME: home } });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--url must be/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('SVC_CONTROL_PORT=x stops a client with exit 2 even where a live server.json names the server', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
    let control: Served | undefined;
    try {
      control = await serve(['control', 'serve', '--port', '0'], { PATH: process.env.PATH, HOME: home });
      const env = { PATH: process.env.PATH, HOME: home };
      const found = await runChild(process.execPath, [CLI, 'control', 'status'], { cwd: home, env });
      assert.equal(found.code, 0, found.stderr);
      const bad = { ...env, SVC_CONTROL_PORT: 'x' };
      const r = await runChild(process.execPath, [CLI, 'control', 'status'], { cwd: home, env: bad });
      assert.equal(r.code, 2, r.stdout + r.stderr);
      assert.match(r.stderr, /SVC_CONTROL_PORT must be/);
    } finally {
      await stop(control);
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe('SVC_SHIP', () => {
  // Documented as 0 or 1: a typo must not decide by itself whether a run leaves the machine.
  it('set to neither 0 nor 1 stops svc start with exit 2 naming it, before a run is made', async () => {
    const repo = makeRepo();
    try {
      const r = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--provider', 'fake'],
        { cwd: repo.repo, env: svcEnv(repo, { SVC_SHIP: 'maybe' }) });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /SVC_SHIP must be "1" or "0" \(got "maybe"\)/);
      assert.equal(existsSync(join(repo.repo, '.svc', 'runs')), false, 'no run was made');
    } finally {
      repo.cleanup();
    }
  });

  // A stop starts no worker and ships nothing new: a person must always be able to stop.
  it('set to neither 0 nor 1 does not stop svc start --stop', async () => {
    const repo = makeRepo();
    try {
      const made = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--provider', 'fake'],
        { cwd: repo.repo, env: svcEnv(repo) });
      const { run } = JSON.parse(made.stdout.trim().split('\n')[0]!) as { run: string };
      const r = await runChild(process.execPath, [CLI, 'start', '--stop', run],
        { cwd: repo.repo, env: svcEnv(repo, { SVC_SHIP: 'maybe' }) });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, new RegExp(`run ${run} had already ended`));
    } finally {
      repo.cleanup();
    }
  });
});

const WORKER_SETTINGS = ['SVC_INFRA_RETRY_WAIT_S', 'SVC_BUDGET_REPO_DAY_USD', 'SVC_BUDGET_SERVER_DAY_USD',
  'GITHUB_API_URL'];

describe('a bad setting a run\'s worker reads', () => {
  const startIn = (repo: ReturnType<typeof makeRepo>, args: string[], extra: NodeJS.ProcessEnv = {}) =>
    runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env: svcEnv(repo, extra) });

  it('a bad retry wait, daily budget or API URL stops svc start with exit 2 before a run is made', async () => {
    const repo = makeRepo();
    try {
      for (const name of WORKER_SETTINGS) {
        const r = await startIn(repo, ['--brief', 'x', '--provider', 'fake'], { [name]: 'x' });
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, new RegExp(`${name} must be`));
      }
      assert.equal(existsSync(join(repo.repo, '.svc', 'runs')), false, 'no run was made');
    } finally {
      repo.cleanup();
    }
  });

  it('a GITHUB_API_URL that is no URL stops svc start --pr with exit 2 naming it, not a bare "Invalid URL"',
    async () => {
      const repo = makeRepo();
      try {
        for (const url of ['not a url', 'https://ghe.example.test:99999/api/v3']) {
          const r = await startIn(repo, ['--brief', 'x', '--provider', 'fake', '--pr'], { GITHUB_API_URL: url });
          assert.equal(r.code, 2, r.stderr);
          assert.match(r.stderr, /GITHUB_API_URL must be an `http:\/\/` or `https:\/\/` address/);
        }
        assert.equal(existsSync(join(repo.repo, '.svc', 'runs')), false, 'no run was made');
      } finally {
        repo.cleanup();
      }
    });

  // A retry, resume or verify goes by the old run's plan, not a new one: each must check the settings as a start does.
  it('they stop --retry, --resume and --verify with exit 2, the run untouched and no run made', async () => {
    const repo = makeRepo({ providers: { fail: '#!/bin/sh\nexit 1\n' } });
    try {
      const first = await startIn(repo, ['--brief', 'x', '--provider', 'fail'], { SVC_SANDBOX: 'none' });
      assert.equal(first.code, 1, first.stderr);
      const run = (JSON.parse(first.stdout.split('\n')[0]!) as { run: string }).run;
      const runs = join(repo.repo, '.svc', 'runs');
      const before = readFileSync(join(runs, run, 'state.json'), 'utf8');
      for (const name of WORKER_SETTINGS) {
        for (const flag of ['--retry', '--resume', '--verify']) {
          const r = await startIn(repo, [flag, run], { SVC_SANDBOX: 'none', [name]: 'x' });
          assert.equal(r.code, 2, `${flag} ${name}: ${r.stderr}`);
          assert.match(r.stderr, new RegExp(`${name} must be`));
        }
      }
      assert.deepEqual(readdirSync(runs), [run], 'no run was made');
      assert.equal(readFileSync(join(runs, run, 'state.json'), 'utf8'), before, 'the run is as it was');
    } finally {
      repo.cleanup();
    }
  });

  // A stop starts no worker: a setting only a worker reads must not keep a person from stopping a run.
  it('they do not keep --stop from stopping a run', async () => {
    const repo = makeRepo();
    try {
      const env = svcEnv(repo, { SVC_SANDBOX: 'none' });
      const made = { input: 'x', forceBrief: true, pr: false, worktree: false, provider: 'fake', repo: repo.repo, env };
      await prepareRun({ ...made, runId: 'stopme' });
      for (const name of WORKER_SETTINGS) {
        const r = await startIn(repo, ['--stop', 'stopme'], { [name]: 'x' });
        assert.equal(r.code, 0, `${name}: ${r.stderr}`);
      }
      const state = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', 'stopme', 'state.json'), 'utf8'));
      assert.equal(state.status, 'stopped');
    } finally {
      repo.cleanup();
    }
  });

  // svc start lets no bad daily budget through, but a worker started some other way must still end: a gate left
  // listening when the setting threw would keep it alive. Killed when the test times out, so a regression fails
  // instead of hanging the suite.
  it('SVC_BUDGET_REPO_DAY_USD=x given to a worker fails its verify and the worker ends',
    { skip: !bwrapWorks && 'needs bubblewrap', timeout: 120_000 }, async (t) => {
      const repo = makeRepo({ providers: { fail: '#!/bin/sh\nexit 1\n' } });
      try {
        const first = await startIn(repo, ['--brief', 'x', '--provider', 'fail']);
        assert.equal(first.code, 1, first.stderr);
        const run = (JSON.parse(first.stdout.split('\n')[0]!) as { run: string }).run;
        const env = svcEnv(repo, { SVC_BUDGET_REPO_DAY_USD: 'x' });
        const args = [CLI, 'worker', 'verify', '--run-id', run, '--repo', repo.repo];
        const verified = await runChild(process.execPath, args,
          { cwd: repo.repo, env, signal: t.signal, killSignal: 'SIGKILL' });
        assert.equal(verified.code, 1, verified.stderr);
        const events = readFileSync(join(repo.repo, '.svc', 'runs', run, 'events.jsonl'), 'utf8');
        assert.match(events, /egress gate did not start: SVC_BUDGET_REPO_DAY_USD must be/);
      } finally {
        repo.cleanup();
      }
    });
});

describe('a provider name no provider has', () => {
  it('given as --provider, stops svc start with exit 2 before a run is made, naming the providers there are',
    async () => {
      const repo = makeRepo();
      try {
        const env = svcEnv(repo);
        const r = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--provider', 'nope'],
          { cwd: repo.repo, env });
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, /Unknown provider "nope" \(--provider\): builtins are claude, .*are fake;/);
        assert.equal(existsSync(join(repo.repo, '.svc', 'runs')), false, 'no run was made');
      } finally {
        repo.cleanup();
      }
    });

  it('named as "provider" in .svc/config.json, stops svc start with exit 2 naming the setting', async () => {
    const repo = makeRepo();
    try {
      const path = join(repo.repo, '.svc', 'config.json');
      writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, 'utf8')), provider: 'nope' }));
      const r = await runChild(process.execPath, [CLI, 'start', '--brief', 'x'], { cwd: repo.repo, env: svcEnv(repo) });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /Unknown provider "nope" \("provider"\)/);
    } finally {
      repo.cleanup();
    }
  });
});
