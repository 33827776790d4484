// What the gemini and opencode end-to-end tests share: finding the installed CLI, a repo whose test fails until the
// scripted model fixes it, an exported issue to start from, and the real `svc` run against a GitHub stand-in.
import { existsSync, readdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { makeRepo, startGithubStandIn, readJson, CLI, GIT_ENV } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { fixScript, askScript, type Script } from './model-script.ts';
import type { StandIn, TestRepo } from '../engine/fixtures.ts';
import { runChild, type ChildResult } from '../helpers/run-child.ts';

/**
 * The folder holding `<name>`'s executable: $SVC_PROVIDER_CLIS/node_modules/.bin if set, else the newest install under
 * ~/.cache/svc-provider-clis/<hash>/ (where scripts/install-provider-clis.js puts the pinned CLIs); null when absent.
 */
export function providerCliDir(name: string): string | null {
  const roots: string[] = [];
  if (process.env.SVC_PROVIDER_CLIS) roots.push(process.env.SVC_PROVIDER_CLIS);
  const cache = join(homedir(), '.cache', 'svc-provider-clis');
  if (existsSync(cache)) for (const h of readdirSync(cache)) roots.push(join(cache, h));
  for (const root of roots) {
    const dir = join(root, 'node_modules', '.bin');
    if (existsSync(join(dir, name))) return dir;
  }
  return null;
}

/**
 * Why the suite for `name` is skipped, or false to run it. With $SVC_PROVIDER_CLIS set the CLI is required: the
 * suite fails in `before` rather than passing unseen.
 */
export function skipUnlessInstalled(name: string): string | false {
  if (providerCliDir(name) || process.env.SVC_PROVIDER_CLIS) return false;
  return `${name} is not installed (npm run test:providers installs it)`;
}

/** The CLI's folder; throws naming where it looked when it is missing. */
export function requireProviderCli(name: string): string {
  const dir = providerCliDir(name);
  const where = `$SVC_PROVIDER_CLIS (${process.env.SVC_PROVIDER_CLIS ?? 'unset'}) or ~/.cache/svc-provider-clis`;
  if (!dir) throw new Error(`${name} not found under ${where}`);
  return dir;
}

/**
 * Credentials svc reads for itself, set (fake) in the environment of every `svc start` the suite runs: none may reach
 * a provider, so none may appear in anything a CLI sends its model.
 */
export const SVC_SECRETS: Record<string, string> = {
  GITHUB_TOKEN: 'gh-secret-token-p2',
  SVC_CONTROL_TOKEN: 'svc-secret-control-p2',
  SVC_API_TOKEN: 'svc-secret-api-p2',
  TRACKERA_API_KEY: 'svc-secret-trackera-p2',
  CHATA_SIGNING_SECRET: 'svc-secret-chata-p2',
  GITHUB_WEBHOOK_SECRET: 'svc-secret-webhook-p2',
};

/**
 * Options for each end-to-end test: a real CLI run takes a minute or more on a busy 2-core host (opencode's first
 * run measured 80 s), past scripts/test.js's default of two minutes per test.
 */
export const CLI_TEST = { timeout: 600_000 };

export const BROKEN = 'hello';
export const FIXED = 'fixed';
/** The repo's test: it fails until a.txt says "fixed". */
export const TEST_COMMAND = 'sh test.sh';
export const SUMMARY = 'Fixed a.txt; the test passes.';
export const QUESTION = 'Which word should a.txt hold?';

/** Read a.txt, replace "hello" with "fixed", run the test, sum up. */
export const fixTheTest = (): Script =>
  fixScript({ file: 'a.txt', old: BROKEN, new: FIXED, test: TEST_COMMAND, summary: SUMMARY });
/** Ask which word a.txt should hold; once answered, write the answer and run the test. */
export const askForTheWord = (): Script =>
  askScript({ question: QUESTION, file: 'a.txt', old: BROKEN, test: TEST_COMMAND });

export interface CliRepo extends TestRepo {
  exportFile: string;
  github: StandIn;
  env: NodeJS.ProcessEnv;
  svc(args: string[], extra?: NodeJS.ProcessEnv): Promise<ChildResult>;
  state(run: string): any;
  /** Waits (up to five minutes: the CLIs are slow to start on a busy machine) for one of `statuses`. */
  waitStatus(run: string, statuses: string[]): Promise<any>;
  /** `svc start --brief <brief> --detach --worktree --provider <provider>`; the run id. */
  startDetached(brief: string, provider: string): Promise<string>;
  events(run: string): Array<{ kind: string; data: any }>;
  close(): Promise<void>;
}

function git(cwd: string, args: string[]): void {
  execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_ENV }, stdio: 'ignore' });
}

/**
 * A repo (pushed to its bare origin) whose required check runs test.sh, failing on a.txt = "hello"; an errtrack
 * export to start from; HOME, PATH (CLI's folder first), the GitHub stand-in and svc's (fake) secrets in `env`.
 */
/**
 * `allow`: origins the agent may reach through svc's egress gate (a CLI configured with its own base URL and key in
 * its own files, not through svc's model routes). The model routes svc holds keys for need no entry. They are
 * loopback addresses, which only the operator's file can open (DESIGN §7a), so they go there.
 */
export async function makeCliRepo(cliDir: string, extraEnv: NodeJS.ProcessEnv, allow: string[] = []): Promise<CliRepo> {
  const policy = { checks: [{ name: 'test', run: ['sh', 'test.sh'] }] };
  const repo = makeRepo({ policy, providers: {} });
  const operatorFile = join(repo.home, '.svc', 'operator.json');
  writeFileSync(operatorFile, JSON.stringify({ ...readJson(operatorFile), network: { allow } }));
  writeFileSync(join(repo.repo, 'test.sh'), `grep -qx ${FIXED} a.txt || { echo "a.txt is not ${FIXED}"; exit 1; }\n`);
  chmodSync(join(repo.repo, 'test.sh'), 0o755);
  git(repo.repo, ['add', 'test.sh']);
  git(repo.repo, ['commit', '-qm', 'a failing test']);
  git(repo.repo, ['push', '-q', 'origin', 'main']);
  const fixtures = new URL('../engine/fixtures', import.meta.url).pathname;
  const exportFile = join(repo.root, 'export.json');
  const issue = readJson(join(fixtures, 'sentry-api-issue.json'));
  writeFileSync(exportFile, JSON.stringify({ issue, event: readJson(join(fixtures, 'sentry-api-latest-event.json')) }));
  const github = await startGithubStandIn();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...GIT_ENV,
    HOME: repo.home,
    XDG_CONFIG_HOME: join(repo.home, '.config'),
    XDG_DATA_HOME: join(repo.home, '.local', 'share'),
    XDG_CACHE_HOME: join(repo.home, '.cache'),
    XDG_STATE_HOME: join(repo.home, '.local', 'state'),
    PATH: `${cliDir}:${process.env.PATH ?? ''}`,
    GITHUB_API_URL: github.url,
    ...SVC_SECRETS,
    ERRTRACK_AUTH_TOKEN: '',
    SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
    ...extraEnv,
  };
  const svc = (args: string[], extra: NodeJS.ProcessEnv = {}) => {
    const stdio: ['ignore', 'pipe', 'pipe'] = ['ignore', 'pipe', 'pipe'];
    return runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env: { ...env, ...extra }, stdio });
  };
  return {
    ...repo,
    exportFile,
    github,
    env,
    svc,
    state: (run) => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json')),
    waitStatus: (run, statuses) => waitFor(() => {
      // `svc start --detach` may answer before the run's worker has written state.json: not there yet is not failure.
      const file = join(repo.repo, '.svc', 'runs', run, 'state.json');
      const s = existsSync(file) ? readJson(file) : null;
      return s && statuses.includes(s.status) ? s : null;
    }, `run ${run} to be ${statuses.join(' or ')}`, 300_000),
    async startDetached(brief, provider) {
      const args = ['start', '--brief', brief, '--detach', '--worktree', '--provider', provider];
      const res = await svc(args);
      if (res.code !== 0) throw new Error(`svc start failed: ${res.stderr}`);
      return JSON.parse(res.stdout.trim()).run;
    },
    events: (run) => {
      const text = readFileSync(join(repo.repo, '.svc', 'runs', run, 'events.jsonl'), 'utf8');
      return text.trim().split('\n').map((l) => JSON.parse(l));
    },
    async close() {
      // A test that failed half-way may leave a run blocked on a question: stop it, so no worker outlives the suite.
      const runs = join(repo.repo, '.svc', 'runs');
      for (const run of existsSync(runs) ? readdirSync(runs) : []) {
        const file = join(runs, run, 'state.json');
        const status = existsSync(file) ? readJson(file).status : null;
        if (['queued', 'running', 'blocked', 'stopping'].includes(status)) await svc(['start', '--stop', run]);
      }
      await github.close();
      repo.cleanup();
    },
  };
}

/** The last stdout line of a foreground `svc start`: its summary. */
export interface RunSummary {
  run: string;
  status: string;
  verdict: string | null;
  pr_url: string | null;
  error: string | null;
}

export function summaryOf(res: ChildResult): RunSummary {
  return JSON.parse(res.stdout.trim().split('\n').at(-1)!);
}
