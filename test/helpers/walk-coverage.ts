// The walks of docs/architecture.md measured by V8's precise coverage: which src/ modules ran code, less what a walk
// does not count, and the numbered list a "## Path (x)" section gives. The order is walk-order.ts's.
import assert from 'node:assert/strict';
import { Session } from 'node:inspector';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join, relative } from 'node:path';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Range { startOffset: number; endOffset: number; count: number }
export interface ScriptCoverage { url: string; functions: Array<{ functionName: string; ranges: Range[] }> }

/** Per file, the functions (and the functions written inside them) that run without counting the file. */
export type CallsNotCounted = Record<string, readonly string[]>;

/**
 * Whether a function of `file` ran outside the functions `allowed` lets run. A module's own body (the nameless
 * function at offset 0) is not a function the walk calls: a child process evaluates every module it imports.
 */
function ranCounted(file: string, functions: ScriptCoverage['functions'], allowed?: readonly string[]): boolean {
  const ran = functions.filter((f) => f.functionName !== '' || f.ranges[0]!.startOffset !== 0)
    .map((f) => f.ranges[0]!).filter((r) => r.count > 0);
  if (!allowed) return ran.length > 0;
  const named = functions.filter((f) => allowed.includes(f.functionName));
  assert.equal(new Set(named.map((f) => f.functionName)).size, allowed.length,
    `${file} no longer has all of ${allowed.join(', ')}: update its walk's calls not counted`);
  const within = named.map((f) => f.ranges[0]!);
  return ran.some((r) => !within.some((w) => w.startOffset <= r.startOffset && r.endOffset <= w.endOffset));
}

/** The src/ modules of `coverage` a counted function of which ran, sorted. */
export function ranFiles(coverage: readonly ScriptCoverage[], calls: CallsNotCounted = {}): string[] {
  return coverage
    .filter((s) => s.url.startsWith('file:'))
    .map((s) => ({ file: relative(ROOT, fileURLToPath(s.url)), functions: s.functions }))
    .filter((s) => s.file.startsWith('src/') && ranCounted(s.file, s.functions, calls[s.file]))
    .map((s) => s.file)
    .sort();
}

/**
 * What the processes that wrote into `dir` (a child's NODE_V8_COVERAGE) ran between start and exit, together. The
 * caller waits for each to exit (each writes its file whole as it does). Exactly `processes` files: one more (a
 * re-exec's first image, another node child) would be a walk the caller does not know, so it fails, naming them.
 */
export function ranInChildren(dir: string, processes: number, calls: CallsNotCounted = {}): string[] {
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  assert.equal(files.length, processes, `${processes} processes were to write coverage, not ${files.join(', ')}`);
  const each = files.map((f) => ranFiles((JSON.parse(readFileSync(join(dir, f), 'utf8')) as {
    result: ScriptCoverage[];
  }).result, calls));
  return [...new Set(each.flat())].sort();
}

/** An inspector session on this thread with precise call counts on. */
export async function startCoverage(): Promise<Session> {
  const session = new Session();
  session.connect();
  const send = (method: string, params?: object) => new Promise<void>((resolve, reject) =>
    session.post(method, params, (err) => (err ? reject(err) : resolve())));
  await send('Profiler.enable');
  await send('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  return session;
}

/** What ran since the last take (taking precise coverage resets the counts), as ranFiles gives it. */
export function takeRan(session: Session, calls: CallsNotCounted = {}): string[] {
  let ran: string[] | undefined;
  session.post('Profiler.takePreciseCoverage', (err, res) => {
    if (err) throw err;
    ran = ranFiles(res.result as ScriptCoverage[], calls);
  });
  // A session on this thread answers before post returns, so the counts are those at the caller's moment.
  assert.ok(ran, 'coverage taken synchronously');
  return ran;
}

/** The files docs/architecture.md's `## Path (x)` section numbers, in its order (one file a step). */
export function documentedWalk(path: string): string[] {
  const doc = readFileSync(`${ROOT}docs/architecture.md`, 'utf8');
  const start = doc.indexOf(`## Path (${path})`);
  assert.ok(start >= 0, `docs/architecture.md has no "## Path (${path})"`);
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/\b(\d+)\. `(src\/[^`]+)`/g)].map((m) => m[2]!);
}

/**
 * Checks a walk's lists name files that exist and the doc lists `bar` files, and returns the doc's list. A renamed
 * or removed file must leave the lists, not be skipped silently.
 */
export function walkToCheck(
  path: string, bar: number, notCounted: readonly string[], calls: CallsNotCounted = {},
): string[] {
  for (const file of [...notCounted, ...Object.keys(calls)]) {
    assert.ok(existsSync(`${ROOT}${file}`), `${file} is gone: update this list`);
  }
  const documented = documentedWalk(path);
  assert.equal(documented.length, bar, `docs/architecture.md's walk (${path}) lists ${documented.length}, not ${bar}`);
  assert.equal(new Set(documented).size, documented.length, `docs/architecture.md's walk (${path}) names a file twice`);
  return documented;
}

/** Whether `file` counts in a walk: not in `notCounted` (a name ending in `/` leaves out its folder). */
export function counts(notCounted: readonly string[]): (file: string) => boolean {
  return (file) => !notCounted.some((n) => (n.endsWith('/') ? file.startsWith(n) : file === n));
}

/** Asserts what ran, less `notCounted`, is the doc's list. */
export function assertWalk(
  path: string, ran: readonly string[], notCounted: readonly string[], documented: readonly string[],
): void {
  const walk = ran.filter(counts(notCounted));
  const says = `docs/architecture.md "Path (${path})" lists what runs:\n${walk.join('\n')}`;
  assert.deepEqual(walk, [...documented].sort(), says);
}

/** The shared request path's own parts, which every route passes: the router, guards, reply writer and metrics. */
export const PIPELINE_INTERNALS = [
  'src/http/router.ts', 'src/http/guards.ts', 'src/http/respond.ts', 'src/http/metrics.ts',
] as const;
