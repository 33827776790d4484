// GET /v1/review/risk: a 0-100 review-risk score from the run's diff (size, sensitive paths, tests) and verdict.
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import { json } from '../../http/respond.ts';
import type { ControlDeps } from '../deps.ts';
import { requiredSegment, storedRun } from '../params.ts';
import { readRunFile } from '../run-receipt.ts';
import { figure, obj, str, tryParseJson } from '../../untrusted.ts';
import type { DiffFile } from '../../engine/diff.ts';

const LOCKFILES = [
  'package-lock.json', 'npm-shrinkwrap.json', 'yarn.lock', 'pnpm-lock.yaml', 'Cargo.lock', 'go.sum', 'poetry.lock',
  'Gemfile.lock', 'composer.lock', 'uv.lock',
];

const SENSITIVE: Array<{ flag: string; weight: number; reason: string; test: RegExp }> = [
  {
    flag: 'ci', weight: 20, reason: 'changes CI configuration',
    test: /(^|\/)(\.github\/workflows\/|\.gitlab-ci\.yml$|\.circleci\/|Jenkinsfile$|azure-pipelines\.yml$)/,
  },
  {
    flag: 'auth', weight: 15, reason: 'touches authentication or permissions code',
    test: /(auth|login|session|password|permission|oauth|jwt|crypto)/i,
  },
  {
    flag: 'migration', weight: 15, reason: 'changes database migrations',
    test: /(^|\/)(migrations?|migrate)\/|\.sql$/i,
  },
  {
    flag: 'lockfile', weight: 10, reason: 'changes a dependency lockfile',
    test: new RegExp(`(^|/)(${LOCKFILES.map((name) => name.replaceAll('.', '\\.')).join('|')})$`),
  },
  {
    flag: 'secrets', weight: 25, reason: 'touches secrets or key material',
    test: /(^|\/)(\.env(\..*)?|.*\.pem|.*\.key|id_rsa.*|.*secret.*|.*credential.*)$/i,
  },
];
const TESTS = /(^|\/)(test|tests|__tests__|spec)\/|\.(test|spec)\.[a-z]+$|_test\.(go|py)$|(^|\/)test_[^/]+\.py$/i;

/** diffstat.json is an artifact any ingest client can upload: untrusted JSON; entries without a path are dropped. */
function parseFiles(raw: Buffer | null): DiffFile[] | null {
  if (!raw) return null;
  const files = obj(tryParseJson(raw.toString('utf8'))).files;
  if (!Array.isArray(files)) return null;
  const out: DiffFile[] = [];
  for (const entry of files) {
    const f = obj(entry);
    const path = str(f.path);
    if (path !== null) out.push({ path, insertions: figure(f.insertions) ?? 0, deletions: figure(f.deletions) ?? 0 });
  }
  return out;
}

function scoreRisk(files: DiffFile[], verdict: string | null) {
  const reasons: string[] = [];
  let score = 0;
  const lines = files.reduce((n, f) => n + f.insertions + f.deletions, 0);
  if (lines > 500) (score += 30), reasons.push(`large diff (${lines} lines)`);
  else if (lines > 200) (score += 20), reasons.push(`sizeable diff (${lines} lines)`);
  else if (lines > 50) (score += 10), reasons.push(`medium diff (${lines} lines)`);
  if (files.length > 20) (score += 10), reasons.push(`${files.length} files changed`);
  const out = files.map((f) => ({ ...f, flags: [] as string[] }));
  for (const s of SENSITIVE) {
    const hit = out.filter((f) => s.test.test(f.path));
    if (hit.length === 0) continue;
    score += s.weight;
    reasons.push(`${s.reason} (${hit.map((f) => f.path).slice(0, 3).join(', ')})`);
    for (const f of hit) f.flags.push(s.flag);
  }
  const tests = out.filter((f) => TESTS.test(f.path));
  for (const f of tests) f.flags.push('test');
  if (files.length > 0 && tests.length === 0) (score += 15), reasons.push('no tests changed');
  if (verdict === 'not_verified') (score += 25), reasons.push('verdict not_verified');
  else if (verdict === 'verified_with_gaps') (score += 10), reasons.push('verdict verified_with_gaps');
  else if (verdict === null) (score += 15), reasons.push('no receipt yet');
  score = Math.min(100, score);
  const level = score >= 75 ? 'critical' : score >= 50 ? 'high' : score >= 25 ? 'medium' : 'low';
  return { score, level, reasons, files: out };
}

export const getReviewRisk: Handler<ControlDeps> = (ctx) => {
  const source = requiredSegment(ctx.query, 'source');
  const run = requiredSegment(ctx.query, 'run');
  const row = storedRun(ctx.deps.stores.runs, { source, run });
  const files = parseFiles(readRunFile(ctx.deps, row, 'diffstat.json'));
  if (!files) throw new HttpError('not_found', `Run ${source}/${run} has no diff yet`);
  return json(200, { source, run, verdict: row.verdict, ...scoreRisk(files, row.verdict) });
};
