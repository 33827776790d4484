// Real things for engine tests: a git repo with a bare origin, command-provider scripts, and a GitHub REST stand-in.
import { mkdtempSync, mkdirSync, writeFileSync, chmodSync, rmSync, readFileSync, existsSync, readdirSync } from 'node:fs';
import { execFileSync, spawn } from 'node:child_process';
import { before, after, beforeEach, afterEach } from 'node:test';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunState } from '../../src/engine/run-state.ts';
import { waitFor } from '../helpers/wait-for.ts';

export interface TestRepo {
  root: string;
  repo: string;
  origin: string;
  home: string;
  bin: string;
  cleanup(): void;
}

const GIT_ENV = { GIT_AUTHOR_NAME: 'Test', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 'Test', GIT_COMMITTER_EMAIL: 't@example.com' };

function git(cwd: string, args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } });
}

/** Under the test HOME: the folder fixture providers may write across runs (declared `writable` in config.json). */
export const AGENT_STATE = 'agent-state';

/**
 * Inside the sandbox HOME is private: the fixtures keep what must outlive one run in a folder under the real HOME. A
 * repository cannot make a host folder writable (config.ts), so the test HOME's operator file defines the
 * same providers with that folder writable, as an operator would. A server with another HOME needs its own grant.
 */
export function grantAgentState(home: string, providers: Record<string, { command: string[] }>): void {
  const granted = Object.fromEntries(Object.entries(providers).map(([n, p]) => [n, { ...p, writable: [AGENT_STATE] }]));
  mkdirSync(join(home, '.svc'), { recursive: true });
  mkdirSync(join(home, AGENT_STATE), { recursive: true });
  writeFileSync(join(home, '.svc', 'operator.json'), JSON.stringify({ providers: granted }));
}

/** A repo on branch main with one commit, pushed to a bare origin at <root>/acme/api.git (so owner/name is acme/api). */
export function makeRepo(opts: { policy?: unknown; providers?: Record<string, string> } = {}): TestRepo {
  const root = mkdtempSync(join(tmpdir(), 'svc-'));
  const origin = join(root, 'acme', 'api.git');
  const repo = join(root, 'work');
  const home = join(root, 'home');
  const bin = join(root, 'bin');
  for (const d of [origin, repo, home, bin, join(home, AGENT_STATE)]) mkdirSync(d, { recursive: true });
  git(origin, ['init', '-q', '--bare', '-b', 'main']);
  git(repo, ['init', '-q', '-b', 'main']);
  git(repo, ['config', 'user.email', 't@example.com']);
  git(repo, ['config', 'user.name', 'Test']);
  writeFileSync(join(repo, 'a.txt'), 'hello\n');
  git(repo, ['add', '.']);
  git(repo, ['commit', '-qm', 'init']);
  git(repo, ['remote', 'add', 'origin', origin]);
  git(repo, ['push', '-q', 'origin', 'main']);
  mkdirSync(join(repo, '.svc'), { recursive: true });
  const providers: Record<string, { command: string[] }> = {};
  for (const [name, script] of Object.entries(opts.providers ?? { fake: EDIT_SCRIPT })) {
    const path = join(bin, `${name}.sh`);
    writeFileSync(path, script);
    chmodSync(path, 0o755);
    providers[name] = { command: [path] };
  }
  writeFileSync(join(repo, '.svc', 'config.json'), JSON.stringify({ providers }));
  grantAgentState(home, providers);
  if (opts.policy !== undefined) writeFileSync(join(repo, '.svc', 'policy.json'), JSON.stringify(opts.policy));
  return { root, repo, origin, home, bin, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** The environment an svc of `repo` runs with in a test: its own HOME, a Control Plane URL nothing answers, no ship. */
export function svcEnv(repo: TestRepo, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const control = { SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0' };
  return { ...process.env, ...GIT_ENV, HOME: repo.home, ...control, ...extra };
}

/**
 * A repo of makeRepo(`opts`) and the `env` its svc runs with (svcEnv plus `extra`): made before the describe's tests
 * and removed after them; with `each`, a fresh one for each test (a run one test leaves unended holds its checkout).
 */
export function repoForTests(
  opts: Parameters<typeof makeRepo>[0], extra: NodeJS.ProcessEnv = {}, each = false,
): TestRepo & { env: NodeJS.ProcessEnv } {
  const made = {} as TestRepo & { env: NodeJS.ProcessEnv };
  (each ? beforeEach : before)(() => {
    const repo = makeRepo(opts);
    Object.assign(made, repo, { env: svcEnv(repo, extra) });
  });
  (each ? afterEach : after)(() => made.cleanup());
  return made;
}

/** Edits a tracked file and reports cost the way a `command` provider does. */
export const EDIT_SCRIPT = `#!/bin/sh
cat > /dev/null
echo "fixed" >> a.txt
echo '{"type":"svc.cost","usd":0.25,"tokens_in":100,"tokens_out":20}'
`;

/** Asks a question on the first call; once the answer is in its prompt, writes it into a.txt. */
export const ASK_SCRIPT = `#!/bin/sh
cat > /dev/null
if grep -q "Answer 1 from the operator" "$SVC_TASK_FILE"; then
  grep -A2 "Answer 1 from the operator" "$SVC_TASK_FILE" | tail -1 >> a.txt
  exit 0
fi
echo "Which database should the migration target?" > "$SVC_QUESTION_FILE"
`;

/**
 * Runs until stopped, with a grandchild whose command line names the run (pids inside a sandbox are not the host's),
 * and says it is up in $HOME/agent-state/<run>.up so a test can then check nothing is left. The grandchild writes
 * that file itself: only then is its command line (set when it execs) surely visible.
 */
export const SLEEP_SCRIPT = `#!/bin/sh
cat > /dev/null
sh -c 'echo up > "$1"; while :; do sleep 1; done' "svc-grandchild-$SVC_RUN_ID" "$HOME/agent-state/$SVC_RUN_ID.up" &
wait
`;

/** Fails its first invocation; the resumed one edits a file and succeeds. */
export const FAILS_ONCE = `#!/bin/sh
cat > /dev/null
if [ -f tried ]; then echo fixed > a.txt; exit 0; fi
touch tried
exit 1
`;

/** Pids whose command line contains `text`, read from /proc. */
export function processesMentioning(text: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(text) && processAlive(Number(name))) pids.push(Number(name));
    } catch {
      // gone already
    }
  }
  return pids;
}

/**
 * Waits until no process names `dir` in its command line. A detached worker (`worker … --repo <dir>/…`) goes on for a
 * moment after its run's status is final: its last writes, then Node's compile cache, written into its HOME as it
 * exits. A folder removed meanwhile is left half there: rmSync stops, with no error, at a file renamed away under it.
 */
export async function processesEnded(dir: string): Promise<void> {
  await waitFor(() => processesMentioning(dir).length === 0 || null, `the processes of ${dir} to end`);
}

/** Live processes whose argv is exactly `argv`: not one that only repeats it, as the bwrap and the shell that start it
 * do (their argv ends with it). */
export function processesRunning(argv: readonly string[]): number[] {
  const cmdline = argv.map((arg) => `${arg}\0`).join('');
  return processesMentioning(cmdline).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8') === cmdline;
    } catch {
      return false;
    }
  });
}

/** Spends over a small budget. */
export const SPEND_SCRIPT = `#!/bin/sh
cat > /dev/null
echo "spent" >> a.txt
echo '{"type":"svc.cost","usd":2,"tokens_in":10,"tokens_out":10}'
`;

export interface StandInPull {
  owner: string;
  repo: string;
  number: number;
  head: string;
  base: string;
  /** What GET reports as head.sha; merges with another `sha` are refused with 409 as GitHub does. */
  head_sha: string | null;
  /** Set by a merge: GET then says `merged` (state `closed`), and a second merge is refused with 405 as GitHub does. */
  merged?: boolean;
}

export interface StandIn {
  url: string;
  requests: Array<{ method: string; path: string; headers: Record<string, string | string[] | undefined>; body: any }>;
  /** Pulls created so far, by number; a test may add or edit one (e.g. a PR in another repo, a moved head). */
  pulls: Map<number, StandInPull>;
  /** While set, each request of `method` is answered 307 to `to` and its own path (and not recorded). */
  redirect: { method: string; to: string } | null;
  close(): Promise<void>;
}

/**
 * GitHub REST stand-in: creates, reads and merges pulls; records every request. With `originOf`, a new pull's head sha
 * is read from the bare origin the branch was pushed to.
 */
export async function startGithubStandIn(opts: { originOf?: (owner: string, repo: string) => string } = {}): Promise<StandIn> {
  const requests: StandIn['requests'] = [];
  const pulls = new Map<number, StandInPull>();
  const stand = { redirect: null as StandIn['redirect'] };
  let n = 0;
  function headSha(owner: string, repo: string, branch: string): string | null {
    if (!opts.originOf) return null;
    try {
      return git(opts.originOf(owner, repo), ['rev-parse', `refs/heads/${branch}`]).trim();
    } catch {
      return null;
    }
  }
  function pullJson(p: StandInPull) {
    const full = `${p.owner}/${p.repo}`;
    return {
      number: p.number, state: p.merged ? 'closed' : 'open', merged: p.merged === true,
      html_url: `https://github.example/${full}/pull/${p.number}`,
      base: { ref: p.base, repo: { full_name: full } },
      head: { ref: p.head, ...(p.head_sha ? { sha: p.head_sha } : {}), repo: { full_name: full } },
    };
  }
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (stand.redirect && req.method === stand.redirect.method) {
        res.writeHead(307, { location: `${stand.redirect.to}${req.url ?? '/'}` }).end();
        return;
      }
      const text = Buffer.concat(chunks).toString('utf8');
      const body = text ? JSON.parse(text) : null;
      requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
      const create = /^\/repos\/([^/]+)\/([^/]+)\/pulls$/.exec(req.url ?? '');
      const one = /^\/repos\/([^/]+)\/([^/]+)\/pulls\/(\d+)(\/merge)?$/.exec(req.url ?? '');
      const pull = one ? pulls.get(Number(one[3])) : undefined;
      const found = pull && one && pull.owner === one[1] && pull.repo === one[2];
      res.setHeader('content-type', 'application/json');
      if (req.method === 'POST' && create) {
        n += 1;
        const made = { owner: create[1]!, repo: create[2]!, number: n, head: body.head, base: body.base, head_sha: headSha(create[1]!, create[2]!, body.head) };
        pulls.set(n, made);
        res.writeHead(201).end(JSON.stringify({ ...pullJson(made), draft: body.draft }));
      } else if (req.method === 'POST' && /^\/repos\/[^/]+\/[^/]+\/issues\/\d+\/comments$/.test(req.url ?? '')) {
        res.writeHead(201).end(JSON.stringify({ id: requests.length }));
      } else if (req.method === 'GET' && one && !one[4] && found) {
        res.writeHead(200).end(JSON.stringify(pullJson(pull)));
      } else if (req.method === 'PUT' && one?.[4] && found) {
        if (pull.merged) {
          res.writeHead(405).end(JSON.stringify({ message: 'Pull Request is not mergeable' }));
        } else if (pull.head_sha && body?.sha !== undefined && body.sha !== pull.head_sha) {
          res.writeHead(409).end(JSON.stringify({ message: 'Head branch was modified. Review and try the merge again.' }));
        } else {
          pull.merged = true;
          res.writeHead(200).end(JSON.stringify({ merged: true, sha: 'f'.repeat(40), message: 'Pull Request successfully merged' }));
        }
      } else {
        res.writeHead(404).end(JSON.stringify({ message: 'Not Found' }));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const address = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    pulls,
    get redirect() {
      return stand.redirect;
    },
    set redirect(to) {
      stand.redirect = to;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** A `command` provider that reports cost line by line and never exits by itself (the live budget tests). */
export const SLOW_SPENDER = `#!/bin/sh
cat > /dev/null
echo "partial work" >> a.txt
while :; do
  echo '{"type":"svc.cost","usd":0.4,"tokens_in":10,"tokens_out":5}'
  sleep 0.2
done
`;

/** Scheduler state of a pid ('T' stopped, 'S' sleeping, …), null when gone. */
export function procState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? null;
  } catch {
    return null;
  }
}

export function readJson(path: string): any {
  return JSON.parse(readFileSync(path, 'utf8'));
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
}

export const CLI = new URL('../../dist/cli.js', import.meta.url).pathname;
export { GIT_ENV };

/** A running local run's state.json in `repo` (its own working tree, no worktree), for tests that open its context. */
export function stateFor(repo: string, run: string, over: Partial<RunState> = {}): RunState {
  const now = new Date().toISOString();
  return {
    source: 'local', run, repo: 'acme/api', group_id: run, status: 'running', verdict: null, brief: 'b', origin: 'cli',
    provider: 'fake', branch: null, pr_url: null, question: null, started_at: now, ended_at: null, updated_at: now,
    cost_usd: null, tokens_in: null, tokens_out: null, exit_code: null, error: null, repo_path: repo,
    input: { kind: 'brief', value: 'b' }, workdir: repo, worktree: false, pr: false, base_sha: 'b'.repeat(40),
    head_sha: null, spec_sha256: '', pid: null, pgid: null, proc_start: null, budget_usd: null, child: null,
    answers: [], base_branch: 'main', failure: null, ...over,
  };
}

const WORKER_TS = fileURLToPath(new URL('../../src/engine/worker.ts', import.meta.url));

/** A worker process for the run in `dir` in which the module at `refused` (a path under the repository) cannot load. */
export function workerRefusing(refused: string, dir: string, env: NodeJS.ProcessEnv) {
  const script = [
    "import { registerHooks } from 'node:module';",
    'registerHooks({ load(url, context, next) {',
    `  if (url.endsWith(${JSON.stringify(`/${refused}`)})) throw new Error('a test refused the module');`,
    '  return next(url, context);',
    '} });',
    `const { executeRun } = await import(${JSON.stringify(WORKER_TS)});`,
    `process.exitCode = await executeRun(${JSON.stringify(dir)}, process.env, 'start', () => {});`,
  ].join('\n');
  return spawn(process.execPath, ['--input-type=module', '-e', script], { env, stdio: 'ignore' });
}
