// Runs that tell the stories the run pages must show, ingested like shippers would send them: runs from two other
// sources (one blocked with a question), a retry chain of three attempts, a run in every status, and a run with a
// 5,000-line diff (25 files of 200 lines, plus a binary file and a large file that starts collapsed).
import type { TestControl } from '../helpers/control-server.ts';
import { ingest, iso } from './seed.ts';

export const REMOTE_BLOCKED = { source: 'laptop', run: 'rlaptop0001' };
export const REMOTE_DONE = { source: 'ci', run: 'rci0000001' };
export const RETRIES = ['rretry0001', 'rretry0002', 'rretry0003'].map((run) => ({ source: 'local', run }));
export const QUEUED = { source: 'local', run: 'rqueued0001' };
export const BIG = { source: 'local', run: 'rbigdiff001' };
export const STATUS_RUNS = [
  QUEUED,
  { source: 'local', run: 'rstopping01' },
  { source: 'local', run: 'rstopped001' },
];
export const BIG_FILES = 25;
export const BIG_LINES_PER_FILE = 200;
export const LARGE_FILE_LINES = 600;

/** The big patch: BIG_FILES added files of BIG_LINES_PER_FILE lines, a binary file, and one large file. */
export function bigPatch(): { patch: string; stat: Array<{ path: string; insertions: number; deletions: number }> } {
  const out: string[] = [];
  const stat: Array<{ path: string; insertions: number; deletions: number }> = [];
  for (let f = 0; f < BIG_FILES; f++) {
    const path = `src/gen/module${String(f).padStart(2, '0')}.ts`;
    out.push(`diff --git a/${path} b/${path}`, 'new file mode 100644', 'index 0000000..3333333', '--- /dev/null', `+++ b/${path}`);
    out.push(`@@ -0,0 +1,${BIG_LINES_PER_FILE} @@`);
    for (let i = 0; i < BIG_LINES_PER_FILE; i++) out.push(`+export const value${i} = '<b>${f}:${i}</b>';`);
    stat.push({ path, insertions: BIG_LINES_PER_FILE, deletions: 0 });
  }
  out.push('diff --git a/assets/logo.png b/assets/logo.png', 'new file mode 100644', 'index 0000000..4444444', 'GIT binary patch',
    'literal 12', 'ScmZ?wbhEHb6krfw@c;lJ0)+tq', '', 'literal 0', 'HcmV?d00001', '');
  stat.push({ path: 'assets/logo.png', insertions: 0, deletions: 0 });
  const large = 'data/fixtures.json';
  out.push(`diff --git a/${large} b/${large}`, 'index 5555555..6666666 100644', `--- a/${large}`, `+++ b/${large}`,
    `@@ -1,${LARGE_FILE_LINES} +1,${LARGE_FILE_LINES} @@`);
  for (let i = 0; i < LARGE_FILE_LINES / 2; i++) out.push(`-  {"id": ${i}, "v": 1},`, `+  {"id": ${i}, "v": 2},`);
  for (let i = LARGE_FILE_LINES / 2; i < LARGE_FILE_LINES; i++) out.push(`   {"id": ${i}},`);
  stat.push({ path: large, insertions: LARGE_FILE_LINES / 2, deletions: LARGE_FILE_LINES / 2 });
  return { patch: `${out.join('\n')}\n`, stat };
}

const b64 = (text: string): string => Buffer.from(text).toString('base64');

export async function seedStory(control: TestControl): Promise<void> {
  const now = Date.now();
  const min = 60_000;
  await ingest(control, {
    source: REMOTE_BLOCKED.source,
    runs: [{ run: REMOTE_BLOCKED.run, repo: 'acme/web', status: 'blocked', brief: 'Pick the cache TTL for the CDN', origin: 'cli', provider: 'claude',
      question: 'Should the CDN cache TTL be 5 minutes or 1 hour?', started_at: iso(now - 20 * min), updated_at: iso(now - 15 * min) }],
    events: [
      { run: REMOTE_BLOCKED.run, seq: 1, ts: iso(now - 20 * min), kind: 'run.status', data: { from: 'queued', to: 'running' } },
      { run: REMOTE_BLOCKED.run, seq: 2, ts: iso(now - 16 * min), kind: 'question', data: { question: 'Should the CDN cache TTL be 5 minutes or 1 hour?' } },
      { run: REMOTE_BLOCKED.run, seq: 3, ts: iso(now - 16 * min + 1), kind: 'run.status', data: { from: 'running', to: 'blocked' } },
    ],
  });
  await ingest(control, {
    source: REMOTE_DONE.source,
    runs: [{ run: REMOTE_DONE.run, repo: 'acme/api', status: 'failed', verdict: 'not_verified', brief: 'Upgrade the ORM', origin: 'trackerb', provider: 'codex',
      branch: 'svc/rci0000001', started_at: iso(now - 50 * min), ended_at: iso(now - 40 * min), updated_at: iso(now - 40 * min), cost_usd: 0.8, exit_code: 1, error: 'Required check "unit" failed' }],
  });
  const retryRuns = RETRIES.map((r, i) => ({
    run: r.run, repo: 'acme/billing', group_id: RETRIES[0]!.run, status: i < 2 ? 'failed' : 'succeeded', verdict: i < 2 ? 'not_verified' : 'verified',
    brief: 'Fix the flaky invoice export', origin: 'errtrack', provider: 'claude', started_at: iso(now - (90 - i * 20) * min),
    ended_at: iso(now - (80 - i * 20) * min), updated_at: iso(now - (80 - i * 20) * min), cost_usd: 0.5,
  }));
  const { patch, stat } = bigPatch();
  await ingest(control, {
    runs: [
      ...retryRuns,
      { run: QUEUED.run, repo: 'acme/api', status: 'queued', brief: 'Waiting for a worker', started_at: iso(now - 3 * min), updated_at: iso(now - 3 * min) },
      { run: 'rstopping01', repo: 'acme/api', status: 'stopping', brief: 'Being stopped', started_at: iso(now - 30 * min), updated_at: iso(now - min) },
      { run: 'rstopped001', repo: 'acme/api', status: 'stopped', brief: 'Stopped by hand', started_at: iso(now - 100 * min), ended_at: iso(now - 95 * min), updated_at: iso(now - 95 * min) },
      { run: BIG.run, repo: 'acme/web', status: 'succeeded', verdict: 'verified_with_gaps', brief: 'Generate the module table', origin: 'cli', provider: 'codex',
        started_at: iso(now - 200 * min), ended_at: iso(now - 180 * min), updated_at: iso(now - 180 * min), cost_usd: 2.1 },
    ],
  });
  await ingest(control, {
    artifacts: [
      { run: BIG.run, path: 'diff.patch', content_type: 'text/x-diff', content_base64: b64(patch) },
      { run: BIG.run, path: 'diffstat.json', content_type: 'application/json', content_base64: b64(JSON.stringify({ files: stat })) },
    ],
  });
}
