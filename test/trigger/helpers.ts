// Shared setup for trigger tests: a real git repo, a real server on port 0 with a temp DB, the fake svc, signing.
import { mkdtempSync, mkdirSync, writeFileSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { resolveTriggerSettings, type TriggerSettings } from '../../src/trigger/settings.ts';
import { startTrigger, type RunningTrigger, type TriggerOverrides } from '../../src/trigger/main.ts';
import { createLogger, type Logger } from '../../src/log.ts';
import type { TriggerStores } from '../../src/db/trigger-stores.ts';
import { pruneBatch, type TriggerRetention } from '../../src/trigger/retention.ts';

export const FIXTURES = '/work/shared/fixtures/webhooks';
export const FAKE_SVC = fileURLToPath(new URL('./fake-svc.mjs', import.meta.url));

export function fixture(name: string): Buffer {
  return readFileSync(join(FIXTURES, name));
}

/** Spread into a labelled event's `issue`, with `sender: OWN.user`: the OWNER author's own label, which starts a job
 * without GITHUB_TOKEN (anyone else's label needs write permission asked of GitHub). */
export const OWN = { user: { login: 'octo' }, author_association: 'OWNER' };

export const SECRETS = {
  SVC_ERRTRACK_WEBHOOK_SECRET: 'errtrack-secret-1',
  CHATA_SIGNING_SECRET: 'chata-secret-2',
  TRACKERA_WEBHOOK_SECRET: 'trackera-secret-3',
  TRACKERB_WEBHOOK_SECRET: 'trackerb-secret-4',
  CHATB_SECURITY_TOKEN: Buffer.from('chatb-key-5-chatb-key-5').toString('base64'),
  GITHUB_WEBHOOK_SECRET: 'github-secret-6',
  SVC_API_TOKEN: 'api-token-7',
} as const;

/** The workspace (`team_id`) of the chata slash-command fixture. */
export const CHATA_TEAM = 'T1DC2JH3J';

/** The rows of a table (jobs, dedupe_keys) as the database holds them; `table` may name a condition. */
export function rowCount(db: Pick<TriggerStores['db'], 'prepare'>, table: string): number {
  return (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
}

const made: string[] = [];
// On process exit, so after every after() hook of the test file (a file-level after() here would run first, being
// registered first, and remove folders its servers, children and databases still use): every folder tempDir made
// goes, whether or not its test removed it (one a test forgets would stay in the system's temp dir).
process.on('exit', () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A fresh folder in the temp dir, removed when the test file's process exits at the latest. */
export function tempDir(prefix = 'svc-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/**
 * A git repo with one committed file (src/app.js by "Ada Lovelace") and one deploy record; its origin names `name`
 * (default acme/api), which is what the `--repo` shorthand serves GitHub events of.
 */
export function makeRepo(name = 'acme/api'): string {
  const repo = tempDir('svc-repo-');
  const git = (...args: string[]): void => {
    execFileSync('git', args, { cwd: repo, stdio: 'ignore', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: repo } });
  };
  git('init', '-q', '-b', 'main');
  git('remote', 'add', 'origin', `https://github.com/${name}.git`);
  mkdirSync(join(repo, 'src'));
  writeFileSync(join(repo, 'src', 'app.js'), 'export const x = 1;\n');
  git('add', '.');
  git('-c', 'user.name=Ada Lovelace', '-c', 'user.email=ada@example.test', 'commit', '-q', '-m', 'first');
  mkdirSync(join(repo, '.svc', 'deploys'), { recursive: true });
  writeFileSync(join(repo, '.svc', 'deploys', 'a.json'), JSON.stringify({ sha: 'abcdef1234567', finished_at: '2026-01-02T03:04:05.000Z', health: 'ok' }));
  writeFileSync(join(repo, '.svc', 'deploys', 'b.json'), JSON.stringify({ sha: '0123456aaaaaa', finished_at: '2025-01-02T03:04:05.000Z', health: 'bad' }));
  return repo;
}

export interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}

export interface TestTrigger extends RunningTrigger {
  repo: string;
  home: string;
  env: NodeJS.ProcessEnv;
  settings: TriggerSettings;
  logs: LogLine[];
  /** Everything the fake svc recorded, oldest first. */
  calls(): Array<{ args: string[]; env: Record<string, string>; cwd: string; handed: unknown }>;
  cleanup(): Promise<void>;
}

export interface TestTriggerOptions extends TriggerOverrides {
  repo?: string;
  /** Serve the repositories of this file instead of the one `repo` (the `--repos` flag). */
  reposFile?: string;
  db?: string;
  home?: string;
  cliPath?: string;
}

export async function startTestTrigger(
  extraEnv: Record<string, string | undefined> = {}, o: TestTriggerOptions = {},
): Promise<TestTrigger> {
  const repo = o.repo ?? makeRepo();
  const home = o.home ?? tempDir('svc-home-');
  // Its own tmp, removed with the HOME: what the jobs it starts write there never lands in the machine's.
  const tmp = join(home, 'tmp');
  mkdirSync(tmp, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    TMPDIR: tmp,
    LANG: 'C.UTF-8',
    TRACKERB_LABELS: 'svc',
    // The fixture's workspace and the one the tests' own chata bodies name.
    CHATA_TEAM_IDS: `${CHATA_TEAM},T1`,
    // Runs its jobs start ship nowhere unless the test names a Control Plane it started (extraEnv).
    SVC_CONTROL_URL: 'http://127.0.0.1:9',
    ...SECRETS,
    ...extraEnv,
  };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const where = o.reposFile ? { repos: o.reposFile } : { repo };
  const flags = { host: '127.0.0.1', port: '0', ...where, db: o.db ?? join(home, 'trigger.db') };
  const settings = resolveTriggerSettings(env, flags, repo);
  settings.cliPath = o.cliPath ?? FAKE_SVC;
  const logs: LogLine[] = [];
  const log: Logger = o.log ?? createLogger('trigger-test', (line) => logs.push(JSON.parse(line) as LogLine));
  const running = await startTrigger(settings, env, { pollMs: 20, bodyTimeoutMs: 500, notifyBackoffMs: 5, ...o, log });
  return {
    ...running,
    repo,
    home,
    env,
    settings,
    logs,
    calls() {
      const dir = join(home, 'fake-svc');
      let names: string[] = [];
      try {
        names = readdirSync(dir).filter((n) => n.startsWith('call-')).sort();
      } catch {
        return [];
      }
      return names.map((n) => JSON.parse(readFileSync(join(dir, n), 'utf8')) as { args: string[]; env: Record<string, string>; cwd: string; handed: unknown });
    },
    async cleanup() {
      await running.close();
      // A run's detached worker may still write its last files in the HOME after its job ended (ENOTEMPTY once in CI).
      rmSync(home, { recursive: true, force: true, maxRetries: 5 });
      if (!o.repo) rmSync(repo, { recursive: true, force: true, maxRetries: 5 });
    },
  };
}

export interface Res {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

export async function post(url: string, body: Buffer | string, headers: Record<string, string> = {}): Promise<Res> {
  const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<Res> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** The headers Slack sends with a slash command's form `raw`, signed now with the test server's secret. */
export function chataFormHeaders(raw: Buffer): Record<string, string> {
  const ts = String(nowSeconds());
  return {
    'content-type': 'application/x-www-form-urlencoded',
    'x-chata-request-timestamp': ts,
    'x-chata-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts),
  };
}

/** Re-serialises a JSON fixture with fields replaced (timestamps set to now, etc.). */
export function withJson(name: string, edit: (value: Record<string, unknown>) => void): Buffer {
  const value = JSON.parse(fixture(name).toString('utf8')) as Record<string, unknown>;
  edit(value);
  return Buffer.from(JSON.stringify(value));
}

function hmac(key: string | Buffer, parts: ReadonlyArray<string | Buffer>): Buffer {
  const mac = createHmac('sha256', key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** The header values a vendor would send, computed here apart from the code under test. */
export const sign = {
  hex(secret: string | Buffer, raw: Buffer | string): string {
    return hmac(secret, [raw]).toString('hex');
  },
  chata(secret: string, raw: Buffer | string, ts: string | number): string {
    return `v0=${hmac(secret, [`v0:${ts}:`, raw]).toString('hex')}`;
  },
  chatb(token: string, raw: Buffer | string): string {
    return `HMAC ${hmac(Buffer.from(token, 'base64'), [raw]).toString('base64')}`;
  },
};

/** Everything expired at `now`, batch after batch, as the server's sweep does over several turns. */
export function pruneAll(stores: TriggerStores, retention: TriggerRetention, now: number): { dedupeKeys: number; jobs: number } {
  const total = { dedupeKeys: 0, jobs: 0 };
  for (;;) {
    const step = pruneBatch(stores, retention, now);
    total.dedupeKeys += step.dedupeKeys;
    total.jobs += step.jobs;
    if (step.done) return total;
  }
}

/** A queued job written as the queue writes one: inserted, then counted. */
export function insertJob(stores: TriggerStores, job: Parameters<TriggerStores['jobs']['insertUncounted']>[0]): void {
  stores.jobs.insertUncounted(job);
  stores.jobs.count(new Map([[job.origin, 1]]));
}
