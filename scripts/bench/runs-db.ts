// Generates (once) and caches a Control Plane DB holding N realistic runs: 90 days of history, a Zipf-like
// spread over repos, retry groups, verdicts that follow status. Direct SQL in one transaction; the runs
// indexes are dropped and rebuilt around the insert (a sorted build is several times faster).
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/open.ts';
import { controlMigrations } from '../../src/db/control-migrations.ts';
import { RUN_JSON_FIELDS } from '../../src/run-json.ts';
import { runToJson } from '../../src/db/runs-store.ts';
import type { RunRow } from '../../src/db/run-types.ts';

const DAY = 86_400_000;
/** The Run JSON fields kept in a column of their own name (the rest — failure, costs, trace — below). */
const PLAIN = RUN_JSON_FIELDS.slice(0, RUN_JSON_FIELDS.indexOf('error') + 1);
const FAILURE = ['failure_class', 'failure_reason', 'failure_retryable'] as const;
const BASE32 = '0123456789abcdefghjkmnpqrstvwxyz';

export const REPOS = [
  'acme/api', 'acme/web', 'acme/mobile', 'acme/billing', 'acme/auth', 'acme/search', 'acme/infra', 'acme/docs',
  'acme/payments', 'acme/notifications', 'acme/analytics', 'acme/admin', 'acme/gateway', 'acme/scheduler',
  'acme/ingest', 'acme/reports', 'acme/cli', 'acme/sdk-js', 'acme/sdk-py', 'acme/sdk-go', 'tools/lint-rules',
  'tools/release', 'tools/ci-images', 'labs/prototype', 'labs/ml-pipeline', 'labs/feature-store', 'ops/runbooks',
  'ops/terraform', 'ops/monitoring', 'ops/backups',
] as const;
const PROVIDERS = ['claude', 'codex', 'gemini', 'aider', 'opencode'];
const ORIGINS = ['cli', 'cli', 'cli', 'api', 'chata', 'chatb', 'trackera', 'trackerb', 'errtrack'];
const BRIEFS = [
  'Fix the flaky retry in the upload client', 'Add pagination to the invoices endpoint',
  'TypeError: Cannot read properties of undefined (reading \'id\') in checkout',
  'Bump the TLS library and fix the build',
  'Make the nightly export idempotent', 'Handle 429 from the payment provider with backoff',
  'Add a regression test for the timezone bug in reports', 'Remove the deprecated v0 routes',
];

/** Deterministic PRNG (mulberry32) so every machine generates the same DB for a given size. */
function createRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `r` + 10 base32 chars of the start time + 16 random ones: sortable by time, like the engine's ids. */
function runId(ms: number, random: () => number): string {
  let time = '';
  let v = ms;
  for (let i = 0; i < 10; i++) {
    time = BASE32[v % 32] + time;
    v = Math.floor(v / 32);
  }
  let tail = '';
  for (let i = 0; i < 16; i++) tail += BASE32[Math.floor(random() * 32)];
  return `r${time}${tail}`;
}

export function schemaKey(): string {
  return createHash('sha256').update(controlMigrations.join('\0')).digest('hex').slice(0, 12);
}

export function runsDbPath(dir: string, rows: number): string {
  return join(dir, `runs-${rows}-${schemaKey()}.db`);
}

/** Returns the cached DB path, generating it first when missing. `now` anchors the 90 days of history. */
export function ensureRunsDb(dir: string, rows: number, log: (line: string) => void): string {
  const path = runsDbPath(dir, rows);
  if (existsSync(path)) return path;
  mkdirSync(dir, { recursive: true });
  const tmp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  const started = Date.now();
  generate(tmp, rows, Date.now());
  renameSync(tmp, path);
  log(`generated ${rows.toLocaleString('en-US')} runs in ${((Date.now() - started) / 1000).toFixed(1)} s → ${path}`);
  return path;
}

function generate(path: string, rows: number, now: number): void {
  const db = openDatabase(path, controlMigrations);
  try {
    const random = createRandom(rows);
    const indexes = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' " +
      'AND sql IS NOT NULL').all() as Array<{ name: string; sql: string }>;
    // Public columns in Run JSON order (the columns are named after the fields), repo_path, and the Run JSON text the
    // runs store writes with every row.
    const insert = db.prepare(`INSERT INTO runs (${PLAIN.join(', ')}, ${FAILURE.join(', ')}, repo_path, json)
      VALUES (${PLAIN.map(() => '?').join(', ')}, ?, ?, ?, ?, ?)`);
    const lastGroupByRepo = new Map<string, string>();
    const start = now - 90 * DAY;
    const step = (90 * DAY) / rows;
    db.exec('BEGIN IMMEDIATE');
    for (const index of indexes) db.exec(`DROP INDEX "${index.name}"`);
    for (let i = 0; i < rows; i++) {
      const startedAt = Math.floor(start + i * step + random() * step);
      // Zipf-like: the first repos get most of the runs.
      const repo = REPOS[Math.min(REPOS.length - 1, Math.floor(REPOS.length * random() ** 2.2))] as string;
      const r = random();
      const source = r < 0.85 ? 'local' : r < 0.95 ? 'ci' : 'buildhost';
      const run = runId(startedAt, random);
      const recent = rows - i <= 40;
      const s = random();
      const status = recent
        ? (s < 0.5 ? 'running' : s < 0.8 ? 'blocked' : 'queued')
        : s < 0.7 ? 'succeeded' : s < 0.92 ? 'failed' : 'stopped';
      const v = random();
      const verdict = status === 'succeeded' ? (v < 0.75 ? 'verified' : 'verified_with_gaps')
        : status === 'failed' && v < 0.8 ? 'not_verified' : null;
      const retry = random() < 0.15 ? lastGroupByRepo.get(repo) : undefined;
      const groupId = retry ?? run;
      lastGroupByRepo.set(repo, groupId);
      const terminal = !recent;
      const endedAt = terminal ? startedAt + Math.floor(120_000 + random() * 2_400_000) : null;
      const costKnown = random() < 0.7;
      const tokensIn = costKnown ? Math.floor(5_000 + random() * 400_000) : null;
      const tuple = [
        source, run, repo, groupId, status, verdict,
        `${BRIEFS[Math.floor(random() * BRIEFS.length)]} (#${i % 9973})`,
        ORIGINS[Math.floor(random() * ORIGINS.length)] ?? 'cli',
        PROVIDERS[Math.floor(random() * PROVIDERS.length)] ?? 'claude', `svc/${run}`,
        verdict === 'verified' && random() < 0.6 ? `https://github.com/${repo}/pull/${1 + (i % 5000)}` : null,
        status === 'blocked' ? 'Which database should the migration target?' : null,
        startedAt, endedAt, endedAt ?? startedAt, costKnown ? Math.round(random() * 400) / 100 : null,
        tokensIn, tokensIn === null ? null : Math.floor(tokensIn / 8),
        terminal ? (status === 'succeeded' ? 0 : 1) : null,
        status === 'failed' ? 'check "test" failed (exit 1)' : null,
      ];
      // A run that did not succeed says why, as the engine records it (docs/engine.md "Why a run failed").
      const failure = status === 'failed' ? ['checks', 'check "test" failed (exit 1)', 0]
        : status === 'stopped' ? ['stopped', 'stopped from the Control Plane', 0] : [null, null, null];
      const row = {
        ...Object.fromEntries(PLAIN.map((f, k) => [f, tuple[k]])),
        ...Object.fromEntries(FAILURE.map((f, k) => [f, failure[k]])), reported: null, metered: null, trace_id: null,
      } as unknown as RunRow;
      insert.run(...tuple, ...failure, `/srv/repos/${repo}`, JSON.stringify(runToJson(row)));
    }
    for (const index of indexes) db.exec(index.sql);
    db.exec('COMMIT');
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } catch (err) {
    db.close();
    rmSync(path, { force: true });
    throw err;
  }
  db.close();
}
