// A realistic Control Plane history for the UI tests, sent through POST /v1/ingest like a shipper would:
// many finished runs (for paging), a blocked run with a question, a running run with a log, a run with a receipt.
import type { TestControl } from '../helpers/control-server.ts';
import { issueReceipt, RECEIPT_TYPE, type ReceiptBody } from '../../src/engine/receipt.ts';
import { loadOrCreateSigningKey } from '../../src/keys.ts';

const DAY = 86_400_000;
const REPOS = ['acme/api', 'acme/web', 'acme/billing'];
const PROVIDERS = ['claude', 'codex', 'gemini'];
const ORIGINS = ['chata', 'trackerb', 'errtrack', 'cli'];
const VERDICTS = ['verified', 'verified_with_gaps', 'not_verified'];

export const BLOCKED = { source: 'local', run: 'rblocked0001' };
export const RUNNING = { source: 'local', run: 'rrunning0001' };
export const RECEIPTED = { source: 'local', run: 'rreceipt0001' };

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

export function finishedRuns(n: number, now = Date.now()): Record<string, unknown>[] {
  const runs: Record<string, unknown>[] = [];
  for (let i = 0; i < n; i++) {
    const started = now - (i + 3) * (DAY / 4);
    const failed = i % 7 === 3;
    runs.push({
      run: `rdone${String(i).padStart(4, '0')}`,
      repo: REPOS[i % REPOS.length],
      group_id: `rdone${String(i).padStart(4, '0')}`,
      status: failed ? 'failed' : 'succeeded',
      verdict: failed ? 'not_verified' : VERDICTS[i % 2],
      brief: `Fix flaky ${['login', 'invoice rounding', 'search paging', 'webhook retry'][i % 4]} test #${i}`,
      origin: ORIGINS[i % ORIGINS.length],
      provider: PROVIDERS[i % PROVIDERS.length],
      branch: `svc/rdone${i}`,
      started_at: iso(started),
      ended_at: iso(started + 60_000 * (3 + (i % 20))),
      updated_at: iso(started + 60_000 * (3 + (i % 20))),
      cost_usd: i % 5 === 4 ? null : Math.round((0.2 + (i % 9) * 0.37) * 100) / 100,
      tokens_in: i % 5 === 4 ? null : 12_000 + i * 310,
      tokens_out: i % 5 === 4 ? null : 2_000 + i * 45,
      ...(failed
        ? {
          error: 'Required check "unit" failed', exit_code: 1,
          failure: { class: 'checks', reason: 'Required check "unit" failed', retryable: false },
        }
        : { exit_code: 0 }),
    });
  }
  return runs;
}

export function liveRuns(now = Date.now()): Record<string, unknown>[] {
  return [
    {
      run: BLOCKED.run, repo: 'acme/api', group_id: BLOCKED.run, status: 'blocked', verdict: null,
      brief: 'Migrate the sessions table to the new schema', origin: 'chata', provider: 'claude', branch: `svc/${BLOCKED.run}`,
      question: 'Should the migration target PostgreSQL 15 or 16?', started_at: iso(now - 9 * 60_000), updated_at: iso(now - 60_000),
      cost_usd: null,
    },
    {
      run: RUNNING.run, repo: 'acme/web', group_id: RUNNING.run, status: 'running', verdict: null,
      brief: 'Add dark mode to the settings page', origin: 'trackerb', provider: 'codex', branch: `svc/${RUNNING.run}`,
      started_at: iso(now - 4 * 60_000), updated_at: iso(now - 10_000), cost_usd: 0.42, tokens_in: 20_000, tokens_out: 3_100,
    },
    {
      run: RECEIPTED.run, repo: 'acme/billing', group_id: RECEIPTED.run, status: 'succeeded', verdict: 'verified',
      brief: 'Round invoice totals half-even <b>not</b> half-up', origin: 'errtrack', provider: 'claude', branch: `svc/${RECEIPTED.run}`,
      pr_url: 'https://github.example/acme/billing/pull/42', started_at: iso(now - 2 * 3600_000), ended_at: iso(now - 2 * 3600_000 + 780_000),
      updated_at: iso(now - 2 * 3600_000 + 780_000), cost_usd: 1.37, tokens_in: 88_000, tokens_out: 9_400, exit_code: 0,
      // The gate metered $1.37; the agent said $0.20.
      metered: { cost_usd: 1.37, tokens_in: 88_000, tokens_out: 9_400, calls: 12, unpriced: 0, unknown: 0 },
      reported: { cost_usd: 0.2, tokens_in: 80_000, tokens_out: 9_000 },
      trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
    },
  ];
}

/** A receipt as src/engine/receipt.ts issues it, signed with the Control Plane's own key (`svcHome`), which the run
 * detail's receipt_check verifies: the page shows only such a receipt as signed. */
export function receipt(svcHome: string, now = Date.now()): Record<string, unknown> {
  return issueReceipt({
    type: RECEIPT_TYPE, version: 1, source: 'local', run: RECEIPTED.run, group_id: RECEIPTED.run,
    repo: 'acme/billing', branch: `svc/${RECEIPTED.run}`,
    base_sha: '4f1c2a9e0b7d6c5a4f1c2a9e0b7d6c5a4f1c2a9e', head_sha: '9a8b7c6d5e4f3a2b1c0d9a8b7c6d5e4f3a2b1c0d',
    spec_sha256: 'aa'.repeat(32), provider: 'claude',
    checks: [
      { name: 'unit', argv: ['npm', 'test'], required: true, exit_code: 0, duration_ms: 41_000, output_sha256: 'bb'.repeat(32) },
      { name: 'lint', argv: ['npm', 'run', 'lint'], required: false, exit_code: 0, duration_ms: 6_000, output_sha256: 'cc'.repeat(32) },
    ],
    diff: { files: 3, insertions: 48, deletions: 12, patch_sha256: 'dd'.repeat(32), paths: DIFF.map((f) => f.path) },
    cost: { usd: 1.37, tokens_in: 88_000, tokens_out: 9_400, source: 'metered',
      reported: { cost_usd: 0.2, tokens_in: 80_000, tokens_out: 9_000 },
      metered: { cost_usd: 1.37, tokens_in: 88_000, tokens_out: 9_400, calls: 12, unpriced: 0, unknown: 0 } },
    verdict: 'verified', gaps: [],
    started_at: iso(now - 2 * 3600_000), ended_at: iso(now - 2 * 3600_000 + 780_000), issued_at: iso(now - 2 * 3600_000 + 770_000),
    network: {
      confined: true, allow: ['registry.npmjs.org:443'], deny: [], connections: 14, denied: 1,
      hosts: [{ host: 'api.anthropic.com', port: 443, connections: 12, bytes_up: 51_200, bytes_down: 480_000 }],
      denials: [{ host: '169.254.169.254', port: 80, reason: 'link-local address', count: 1 }],
    },
  } as unknown as ReceiptBody, loadOrCreateSigningKey(svcHome)) as unknown as Record<string, unknown>;
}

export const DIFF = [
  { path: 'src/invoice/round.ts', insertions: 30, deletions: 10 },
  { path: 'test/invoice/round.test.ts', insertions: 16, deletions: 0 },
  { path: 'migrations/0012_invoice_precision.sql', insertions: 2, deletions: 2 },
];

/** A unified diff with exactly the files and +/- counts given; its lines carry markup that must stay text. */
export function patchFor(files: Array<{ path: string; insertions: number; deletions: number }>): string {
  const out: string[] = [];
  for (const f of files) {
    out.push(`diff --git a/${f.path} b/${f.path}`, 'index 1111111..2222222 100644', `--- a/${f.path}`, `+++ b/${f.path}`);
    const context = 2;
    out.push(`@@ -10,${f.deletions + context} +10,${f.insertions + context} @@ function round()`);
    out.push(' const before = 1;');
    for (let i = 0; i < f.deletions; i++) out.push(`-old line ${i} <img src=x onerror=alert(1)>`);
    for (let i = 0; i < f.insertions; i++) out.push(`+new line ${i} <script>alert("diff")</script>`);
    out.push(' const after = 2;');
  }
  return `${out.join('\n')}\n`;
}

export function events(now = Date.now()): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const add = (run: string, seq: number, ms: number, kind: string, data: unknown) => out.push({ run, seq, ts: iso(ms), kind, data });
  const t = now - 4 * 60_000;
  add(RUNNING.run, 1, t, 'run.status', { from: 'queued', to: 'running' });
  for (let i = 2; i < 14; i++) add(RUNNING.run, i, t + i * 5000, 'log', { stream: i % 5 === 0 ? 'stderr' : 'stdout', text: `step ${i}: editing src/settings/theme.ts <script>alert(1)</script>` });
  const b = now - 9 * 60_000;
  add(BLOCKED.run, 1, b, 'run.status', { from: 'queued', to: 'running' });
  add(BLOCKED.run, 2, b + 20_000, 'log', { stream: 'stdout', text: 'Reading migrations/0007_sessions.sql' });
  add(BLOCKED.run, 3, b + 60_000, 'question', { question: 'Should the migration target PostgreSQL 15 or 16?' });
  add(BLOCKED.run, 4, b + 60_001, 'run.status', { from: 'running', to: 'blocked' });
  // The receipted run tells a whole story: queued, a provider invocation, a blocked wait, a failed and a passed
  // check around a second invocation, the receipt and the PR.
  const r = now - 2 * 3600_000;
  add(RECEIPTED.run, 1, r + 15_000, 'run.status', { from: 'queued', to: 'running' });
  add(RECEIPTED.run, 2, r + 20_000, 'log', { stream: 'svc', text: 'provider claude started (attempt 1)' });
  add(RECEIPTED.run, 3, r + 100_000, 'question', { question: 'Round half-even or half-up for negative totals?' });
  add(RECEIPTED.run, 4, r + 100_001, 'run.status', { from: 'running', to: 'blocked' });
  add(RECEIPTED.run, 5, r + 200_000, 'answer', { answer: 'half-even' });
  add(RECEIPTED.run, 6, r + 200_500, 'run.status', { from: 'blocked', to: 'running' });
  add(RECEIPTED.run, 7, r + 500_000, 'cost', { usd: 0.9, tokens_in: 60_000, tokens_out: 6_000 });
  add(RECEIPTED.run, 8, r + 540_000, 'check', { name: 'lint', exit_code: 1, duration_ms: 20_000 });
  add(RECEIPTED.run, 9, r + 545_000, 'log', { stream: 'svc', text: 'provider claude started (attempt 2)' });
  add(RECEIPTED.run, 10, r + 559_000, 'cost', { usd: 0.47, tokens_in: 28_000, tokens_out: 3_400 });
  add(RECEIPTED.run, 11, r + 600_000, 'check', { name: 'unit', exit_code: 0, duration_ms: 41_000 });
  add(RECEIPTED.run, 12, r + 700_000, 'receipt', { verdict: 'verified' });
  add(RECEIPTED.run, 13, r + 760_000, 'pr', { opened: true, url: 'https://github.example/acme/billing/pull/42' });
  add(RECEIPTED.run, 14, r + 780_000, 'run.status', { from: 'running', to: 'succeeded' });
  return out;
}

/** Sends one batch like the shipper; retried on a dropped socket (tests drop connections on purpose), which is safe
 * because ingest is idempotent on (source, run, seq). */
export async function ingest(control: TestControl, body: Record<string, unknown>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await control.request('POST', '/v1/ingest', { body: { source: 'local', runs: [], events: [], artifacts: [], ...body } });
      if (res.status !== 200) throw new Error(`ingest answered ${res.status}: ${res.text}`);
      return;
    } catch (err) {
      if (attempt >= 3 || !/fetch failed|other side closed/.test(String((err as Error).message))) throw err;
    }
  }
}

/** Seeds `finished` finished runs plus the blocked, running and receipted runs with their events and artifacts. */
export async function seed(control: TestControl, finished = 60): Promise<void> {
  const now = Date.now();
  await ingest(control, { runs: [...finishedRuns(finished, now), ...liveRuns(now)], events: events(now) });
  const receiptJson = Buffer.from(JSON.stringify(receipt(control.deps.settings.svcHome, now), null, 2)).toString('base64');
  await ingest(control, {
    artifacts: [
      { run: RECEIPTED.run, path: 'receipt.json', content_type: 'application/json', content_base64: receiptJson },
      { run: RECEIPTED.run, path: 'checks/unit.txt', content_type: 'text/plain', content_base64: Buffer.from('42 passing\n').toString('base64') },
      { run: RECEIPTED.run, path: 'diffstat.json', content_type: 'application/json', content_base64: Buffer.from(JSON.stringify({ files: DIFF })).toString('base64') },
      { run: RECEIPTED.run, path: 'diff.patch', content_type: 'text/x-diff', content_base64: Buffer.from(patchFor(DIFF)).toString('base64') },
    ],
  });
}
