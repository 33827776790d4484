// The runs list's pages: for every filter shape and limit, following the last run's key visits every selected run
// once, in order (checked against a filter computed in JS over all rows, independent of the SQL), and each run's
// stored Run JSON text is JSON.stringify(runToJson(row)) of its row as it now stands, however it was written.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/open.ts';
import { controlMigrations } from '../../src/db/control-migrations.ts';
import { createRunsStore, type RunsStore } from '../../src/db/runs-store.ts';
import type { RunFilter, RunKey } from '../../src/db/run-types.ts';
import { runToJson } from '../../src/db/runs-store.ts';
import { RUN_STATUSES, VERDICTS } from '../../src/run-json.ts';

const ODD = ['plain', 'quote " and \\ backslash', 'ctl \u0001\u001f\n\t', 'lone \ud800 surrogate', 'astral 😀 ünï', '', '</script>'];

/** Deterministic varied runs: ties on started_at, nulls, odd strings, odd numbers. */
function seed(runs: RunsStore, n: number): void {
  for (let i = 0; i < n; i++) {
    const status = RUN_STATUSES[i % RUN_STATUSES.length]!;
    runs.upsert(i % 3 === 0 ? 'ci' : 'local', {
      run: `r${String(i).padStart(4, '0')}`,
      status,
      started_at: 1_700_000_000_000 + Math.floor(i / 3) * 1000,
      updated_at: 1_700_000_000_000 + i * 1000,
      ended_at: i % 4 === 0 ? null : 1_700_000_100_000 + i,
      repo: i % 5 === 0 ? null : `acme/r${i % 4}`,
      verdict: i % 6 === 0 ? null : VERDICTS[i % VERDICTS.length]!,
      brief: ODD[i % ODD.length]!,
      group_id: `g${i % 17}`,
      cost_usd: i % 7 === 0 ? null : [0, -0, 0.1 + 0.2, 1e21, 123.456][i % 5]!,
      tokens_in: i % 2 ? i * 1000 : null,
      error: i % 9 === 0 ? ODD[(i + 3) % ODD.length]! : null,
    });
  }
}

function missingTexts(db: { prepare(sql: string): { get(): unknown } }): number {
  return (db.prepare('SELECT count(*) AS n FROM runs WHERE json IS NULL').get() as { n: number }).n;
}

/** The runs a filter selects, newest first, computed in JS over every row (independent of the SQL). */
function expectedIds(runs: RunsStore, f: RunFilter): string[] {
  const newer = (a: RunKey, b: RunKey): boolean =>
    a.started_at !== b.started_at ? a.started_at > b.started_at : a.source !== b.source ? a.source > b.source : a.run > b.run;
  return runs.list({ limit: 100_000 })
    .filter((r) => (f.verdict === undefined || r.verdict === f.verdict) && (f.repo === undefined || r.repo === f.repo)
      && (f.group_id === undefined || r.group_id === f.group_id) && (f.status === undefined || r.status === f.status)
      && (f.since === undefined || r.started_at >= f.since) && (f.until === undefined || r.started_at < f.until)
      && (f.after === undefined || newer(f.after, r)))
    .map((r) => `${r.source}/${r.run}`);
}

/** Walks every page of a filter as GET /v1/runs does (one row past the page), and as the store's `each` does (a full
 * page, then the next); returns how many pages it took. */
function walk(runs: RunsStore, base: Omit<RunFilter, 'after'>): number {
  let filter: RunFilter = { ...base };
  const all = expectedIds(runs, base);
  const seen: string[] = [];
  for (let pages = 1; ; pages++) {
    const { items, next } = runs.page(filter);
    const rows = runs.list(filter);
    assert.deepEqual(items, rows.map((r) => JSON.stringify(runToJson(r))), `filter ${JSON.stringify(filter)}`);
    assert.deepEqual(rows.map((r) => `${r.source}/${r.run}`), all.slice(seen.length, seen.length + filter.limit));
    seen.push(...rows.map((r) => `${r.source}/${r.run}`));
    if (!next) {
      assert.deepEqual(seen, all, `paging ${JSON.stringify(base)} visits every selected run once, in order`);
      const each = [...runs.each(base)].map((r) => `${r.source}/${r.run}`);
      assert.deepEqual(each, all, `each(${JSON.stringify(base)}) yields every selected run once, in order`);
      return pages;
    }
    filter = { ...base, after: next };
  }
}

describe('runs list paging', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-runs-paging-'));
  const path = join(dir, 'control.db');
  const db = openDatabase(path, controlMigrations);
  const runs = createRunsStore(db);
  after(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  seed(runs, 400);

  it('visits every selected run once, in order, for every filter shape and limit', () => {
    const filters: Array<Omit<RunFilter, 'after'>> = [];
    for (const limit of [1, 2, 7, 50, 500]) {
      filters.push({ limit }, { limit, repo: 'acme/r1' }, { limit, verdict: null }, { limit, verdict: 'verified' },
        { limit, status: 'running' }, { limit, group_id: 'g3' }, { limit, since: 1_700_000_030_000, until: 1_700_000_090_000 },
        { limit, repo: 'acme/r2', verdict: 'not_verified', until: 1_700_000_100_000 }, { limit, repo: 'nope' },
        { limit, until: 1_700_000_060_000 }, { limit, until: 1_700_000_060_001 }, { limit, until: 8.64e15 });
    }
    let pages = 0;
    for (const f of filters) pages += walk(runs, f);
    assert.ok(pages > 600, `walked ${pages} pages`);
  });

  it('keeps the text current through upsert, patch and setStatus, and not through an ignored older upsert', () => {
    runs.setStatus('local', 'r0001', 'failed', 1_800_000_000_000, { error: 'now "failed"', ended_at: 1_800_000_000_000 });
    runs.patch('ci', 'r0003', { brief: 'patched ✓', cost_usd: 2.5 });
    runs.upsert('local', { run: 'r0002', status: 'stopped', started_at: 1, updated_at: 1_900_000_000_000, brief: 'upserted' });
    assert.equal(runs.upsert('local', { run: 'r0002', status: 'running', started_at: 1, updated_at: 5 }), false);
    walk(runs, { limit: 50 });
    assert.match(runs.page({ limit: 500 }).items.join(), /"brief":"patched ✓"/);
    assert.equal(missingTexts(db), 0);
  });

  it('serves a run that plain SQL changed, from this or another connection, as its columns now say', () => {
    db.prepare("UPDATE runs SET status = 'stopped' WHERE run = 'r0399'").run();
    const other = openDatabase(path, controlMigrations);
    try {
      other.prepare("UPDATE runs SET brief = 'from elsewhere' WHERE run IN ('r0398', 'r0010')").run();
    } finally {
      other.close();
    }
    assert.equal(missingTexts(db), 3, 'the trigger dropped each changed run\'s text');
    assert.match(runs.page({ limit: 5 }).items.join(), /"run":"r0399","repo":[^}]*"status":"stopped"/);
    walk(runs, { limit: 50 });
    walk(runs, { limit: 7, repo: 'acme/r3' });
    runs.patch('local', 'r0010', { cost_usd: 1 });
    assert.equal(missingTexts(db), 2, 'a write through the store stores the text again');
  });

  it('never returns the internal json column as part of a run row', () => {
    assert.equal('json' in runs.get('local', 'r0001')!, false);
    assert.equal('json' in runs.list({ limit: 1 })[0]!, false);
  });
});
