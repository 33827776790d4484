// The UI's pure modules behind the changes view, the run timeline and time formatting, run in Node:
// static/lib/diff-parse.js, static/lib/timeline.js and static/lib/time.js.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

interface DiffLine { kind: string; old: number | null; new: number | null; text: string }
interface DiffFile { path: string; oldPath: string | null; status: string; binary: boolean; additions: number; deletions: number; hunks: Array<{ header: string; lines: DiffLine[] }> }
interface Span { kind: string; start: number; end: number; label: string; ok?: boolean; open?: boolean }
interface Timeline { start: number; end: number; live: boolean; spans: Span[]; marks: Array<{ kind: string; at: number; label: string }> }

// Imported by URL so the test type-checks without allowJs; the modules are plain browser JS.
const diff: { parseDiff(p: string): DiffFile[]; lineCount(f: DiffFile): number } = await import(new URL('../../static/lib/diff-parse.js', import.meta.url).href);
const tl: { buildTimeline(run: object, events: object[], now: number): Timeline | null } = await import(new URL('../../static/lib/timeline.js', import.meta.url).href);
const time: { relative(t: unknown, now?: number): string; absolute(t: unknown, seconds?: boolean): string; runDuration(r: object, now?: number): string; duration(ms: number): string } =
  await import(new URL('../../static/lib/time.js', import.meta.url).href);

const PATCH = [
  'diff --git a/src/a.ts b/src/a.ts',
  'index 1..2 100644',
  '--- a/src/a.ts',
  '+++ b/src/a.ts',
  '@@ -3,4 +3,5 @@ function f()',
  ' keep',
  '-gone',
  '--- looks like a header but is a removed line',
  '+added <b>',
  '+++ looks like a header but is an added line',
  '+third',
  ' tail',
  '\\ No newline at end of file',
  'diff --git a/img.png b/img.png',
  'new file mode 100644',
  'GIT binary patch',
  'literal 5',
  'McmZ?wbhEHb0',
  '',
  'diff --git a/old name.txt b/new name.txt',
  'similarity index 90%',
  'rename from old name.txt',
  'rename to new name.txt',
  '--- a/old name.txt',
  '+++ b/new name.txt',
  '@@ -1 +1 @@',
  '-x',
  '+y',
  'diff --git a/del.txt b/del.txt',
  'deleted file mode 100644',
  '--- a/del.txt',
  '+++ /dev/null',
  '@@ -1,2 +0,0 @@',
  '-one',
  '-two',
  '',
].join('\n');

describe('diff-parse', () => {
  const files = diff.parseDiff(PATCH);

  it('reads each file with its status, paths and counts', () => {
    assert.deepEqual(files.map((f) => [f.path, f.status, f.binary, f.additions, f.deletions]), [
      ['src/a.ts', 'modified', false, 3, 2],
      ['img.png', 'added', true, 0, 0],
      ['new name.txt', 'renamed', false, 1, 1],
      ['del.txt', 'deleted', false, 0, 2],
    ]);
    assert.equal(files[2]!.oldPath, 'old name.txt');
  });

  it('numbers old and new lines through a hunk, even lines that look like ---/+++ headers', () => {
    const lines = files[0]!.hunks[0]!.lines;
    assert.deepEqual(lines.map((l) => [l.kind, l.old, l.new]), [
      ['context', 3, 3], ['del', 4, null], ['del', 5, null], ['add', null, 4], ['add', null, 5], ['add', null, 6], ['context', 6, 7], ['note', null, null],
    ]);
    assert.equal(lines[3]!.text, 'added <b>');
    assert.equal(lines[7]!.text, 'No newline at end of file');
  });

  it('skips a binary body and counts shown lines', () => {
    assert.equal(files[1]!.hunks.length, 0);
    assert.equal(diff.lineCount(files[0]!), 9);
    assert.deepEqual(diff.parseDiff(''), []);
    assert.deepEqual(diff.parseDiff('not a diff at all\n'), []);
  });
});

describe('timeline', () => {
  const t0 = Date.UTC(2026, 10, 24, 10, 0, 0);
  const ev = (id: number, s: number, kind: string, data: object) => ({ id, kind, data, ts: t0 + s * 1000 });
  const events = [
    ev(1, 10, 'run.status', { from: 'queued', to: 'running' }),
    // The span comes from the fields; the text is for people (a log line may be reworded).
    ev(2, 12, 'log', { stream: 'svc', text: 'claude is starting', provider: 'claude', attempt: 1 }),
    ev(3, 30, 'question', { question: 'Which port?' }),
    ev(4, 30, 'run.status', { from: 'running', to: 'blocked' }),
    ev(5, 90, 'run.status', { from: 'blocked', to: 'running' }),
    ev(6, 100, 'cost', { usd: 1 }),
    ev(7, 130, 'check', { name: 'unit', exit_code: 1, duration_ms: 20_000 }),
    ev(8, 140, 'receipt', { verdict: 'not_verified' }),
    ev(9, 150, 'run.status', { from: 'running', to: 'failed' }),
  ];

  it('builds queued, provider, blocked and check spans and receipt marks from the events', () => {
    const t = tl.buildTimeline({ started_at: new Date(t0).toISOString(), ended_at: new Date(t0 + 150_000).toISOString(), status: 'failed' }, events, t0 + 999_000)!;
    const rel = (s: Span) => [s.kind, (s.start - t0) / 1000, (s.end - t0) / 1000];
    assert.deepEqual(t.spans.map(rel), [['queued', 0, 10], ['provider', 12, 100], ['blocked', 30, 90], ['check', 110, 130]]);
    assert.equal(t.spans[2]!.label, 'blocked: Which port?');
    assert.equal(t.spans[3]!.ok, false);
    assert.deepEqual(t.marks.map((m) => m.kind), ['receipt']);
    assert.equal(t.live, false);
    assert.ok(t.spans.every((s) => !s.open));
  });

  it('gives a resumed run no queued span from its start to the resume', () => {
    const ended_at = new Date(t0 + 150_000).toISOString();
    const run = { started_at: new Date(t0).toISOString(), ended_at, status: 'failed' };
    // Stopped while queued, resumed a day later: its launcher queued it again, its worker ran it.
    const resumed = [ev(1, 5, 'run.status', { from: 'queued', to: 'stopped' }),
      ev(2, 86_400, 'run.status', { from: 'stopped', to: 'queued', resumed: true }),
      ev(3, 86_401, 'run.status', { from: 'queued', to: 'running', resumed: true })];
    assert.deepEqual(tl.buildTimeline(run, resumed, t0)!.spans, []);
  });

  it('labels provider spans from the fields, and reads the text of runs recorded before the fields', () => {
    const run = { started_at: new Date(t0).toISOString(), ended_at: new Date(t0 + 150_000).toISOString(), status: 'failed' };
    const labels = (evs: typeof events) => tl.buildTimeline(run, evs, t0)!.spans.filter((s) => s.kind === 'provider')
      .map((s) => s.label);
    assert.deepEqual(labels(events), ['provider claude (attempt 1)']);
    const old = [ev(2, 12, 'log', { stream: 'svc', text: 'provider codex started (attempt 2)' })];
    assert.deepEqual(labels(old), ['provider codex (attempt 2)']);
    const agentLine = [ev(2, 12, 'log', { stream: 'stdout', text: 'provider codex started (attempt 2)', provider: 'x' })];
    assert.deepEqual(labels(agentLine), [], 'only svc\'s own lines start a span, never the agent\'s output');
  });

  // A pod's run container's `svc` lines are marked (its agent can write any line there): they drew svc's phases.
  it('draws no span or mark from a line marked as a pod\'s run container\'s', () => {
    const run = { started_at: new Date(t0).toISOString(), ended_at: null, status: 'running' };
    const by = 'run-container';
    const marked = [ev(2, 12, 'log', { stream: 'svc', text: 'provider codex started', provider: 'codex', by }),
      ev(3, 20, 'log', { stream: 'svc', text: 'retried automatically', retry: 'automatic', by }),
      ev(4, 22, 'log', { stream: 'svc', text: 'provider codex started (attempt 2)', by })];
    const t = tl.buildTimeline(run, marked, t0)!;
    assert.deepEqual([t.spans, t.marks], [[], []]);
  });

  // Its checks and errors are drawn (their pass, fail and time are what the run shows), labelled as its word.
  it('labels a check and an error marked as a pod\'s run container\'s as its report', () => {
    const run = { started_at: new Date(t0).toISOString(), ended_at: null, status: 'running' };
    const by = 'run-container';
    const marked = [ev(2, 12, 'check', { name: 'test', exit_code: 0, duration_ms: 1000, by }),
      ev(3, 20, 'error', { message: 'the gate is down', by })];
    const t = tl.buildTimeline(run, marked, t0 + 30_000)!;
    const whose = ' (the run container\'s report)';
    assert.deepEqual([t.spans.map((s) => s.label), t.marks.map((m) => m.label)],
      [[`check test passed${whose}`], [`error: the gate is down${whose}`]]);
  });

  it('keeps open spans running to now while the run is live', () => {
    const now = t0 + 60_000;
    const t = tl.buildTimeline({ started_at: new Date(t0).toISOString(), ended_at: null, status: 'blocked' }, events.slice(0, 4), now)!;
    assert.equal(t.live, true);
    assert.equal(t.end, now);
    assert.deepEqual(t.spans.filter((s) => s.open).map((s) => [s.kind, s.end]), [['provider', now], ['blocked', now]]);
    assert.equal(tl.buildTimeline({ started_at: null }, [], now), null);
  });
});

describe('time', () => {
  it('formats relative times in both directions and absolute times in one shape', () => {
    const now = Date.UTC(2026, 10, 24, 12, 0, 0);
    assert.equal(time.relative(now - 2000, now), 'just now');
    assert.equal(time.relative(now - 45_000, now), '45s ago');
    assert.equal(time.relative(now - 3 * 3600_000, now), '3h ago');
    assert.equal(time.relative(now - 3 * 86_400_000, now), '3d ago');
    assert.equal(time.relative(now + 120_000, now), 'in 2m');
    assert.equal(time.relative(null), '—');
    assert.match(time.absolute(now), /^\d{4}-\d\d-\d\d \d\d:\d\d$/);
    assert.match(time.absolute(new Date(now).toISOString(), true), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
  });

  it('gives a queued run no ticking duration', () => {
    const now = Date.UTC(2026, 10, 24, 12, 0, 0);
    assert.equal(time.runDuration({ status: 'queued', started_at: new Date(now - 60_000).toISOString() }, now), 'queued');
    assert.equal(time.runDuration({ status: 'running', started_at: new Date(now - 65_000).toISOString() }, now), '1m 05s');
    assert.equal(time.duration(2 * 3600_000 + 4 * 60_000), '2h 04m');
  });
});
