// Whether a run's Evidence Receipt is genuine (signed by a key the Control Plane knows: its own or a registered
// runner's), about that run, and accepted by its repo's policy.
import { hash } from 'node:crypto';
import type { ControlDeps } from './deps.ts';
import { errorMessage } from '../errors.ts';
import type { RunRow } from '../db/run-types.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../json-value.ts';
import { tryParseJson } from '../untrusted.ts';
import { knownKeys, type KnownKey } from '../keys.ts';
import { verifyReceipt, type Receipt } from '../engine/receipt.ts';
import { loadPolicyFile, verdictAccepted, DEFAULT_POLICY, type Policy } from '../engine/policy.ts';
import { openPlainPath, readPlainIn, skipReason } from '../engine/plain-tree.ts';

/** The largest run file read straight from a run folder (as import takes). */
const MAX_RUN_FILE = 16 * 1024 * 1024;

export type Signer = Pick<KnownKey, 'kid' | 'name' | 'origin'>;

/** `sha256`: of the receipt.json bytes checked; `unknownKid`: the kid of an intact receipt whose key is not known here
 * (its signature cannot be checked: the file names the kid, which anyone can). */
type ReceiptVerdict =
  | { ok: true; receipt: Receipt; signer: Signer; sha256: string }
  | { ok: false; reason: string; sha256?: string; unknownKid?: string };

/** As stored by ingest, else from the run folder on this machine, where a link is logged and read as no file. */
export function readRunFile(deps: ControlDeps, row: RunRow, path: string): Buffer | null {
  const stored = deps.stores.artifacts.get(row.source, row.run, path);
  if (stored) return Buffer.from(stored.content);
  if (!row.repo_path) return null;
  const parts = path.split('/');
  const name = parts.pop()!;
  const refused = (entry: string, kind: string): null => {
    if (kind !== 'link') return null;
    deps.log.warn('run file not read', { source: row.source, run: row.run, entry, reason: skipReason('link') });
    return null;
  };
  const dir = openPlainPath(row.repo_path, ['.svc', 'runs', row.run, 'artifacts', ...parts]);
  if ('failed' in dir) return refused(dir.failed, dir.kind);
  try {
    const content = readPlainIn(dir, name, MAX_RUN_FILE);
    return typeof content === 'string' ? refused(`${dir.path}/${name}`, content) : content;
  } finally {
    dir.close();
  }
}

/**
 * Whether the run's receipt.json is signed by a key this Control Plane knows and is about this run: the only receipt
 * the run page and `svc runs show` present as signed (the run detail's `receipt_check`). Whoever shipped the run wrote
 * that file, say a pod's run container with its handed key, where the agent can write it; a pod's signer replaces it
 * only when it signs (docs/deploy.md "Receipts from pods").
 */
export function checkSignedReceipt(deps: ControlDeps, row: RunRow, makeKey = true): ReceiptVerdict {
  const raw = readRunFile(deps, row, 'receipt.json');
  if (!raw) return { ok: false, reason: `Run ${row.source}/${row.run} has no Evidence Receipt` };
  const sha256 = hash('sha256', raw, 'hex');
  const value = tryParseJson(raw.toString('utf8'));
  if (value === undefined) return { ok: false, reason: 'The receipt is not valid JSON', sha256 };
  // An uploaded artifact saw no body depth limit, and checking a receipt serialises it recursively (canonical JSON).
  if (nestsDeeperThan(value, MAX_JSON_DEPTH)) {
    return { ok: false, reason: `The receipt nests deeper than ${MAX_JSON_DEPTH} arrays/objects`, sha256 };
  }
  const known = knownKeys(deps.settings.svcHome, makeKey);
  const check = verifyReceipt(value, new Map(known.map((k) => [k.kid, k.publicKey])));
  if (!check.ok || !check.receipt) {
    const unknownKid = check.problem === 'unknown_key' ? (value as { kid: string }).kid : undefined;
    return { ok: false, reason: check.message, sha256, unknownKid };
  }
  const key = known.find((k) => k.kid === check.receipt!.kid)!;
  const signer: Signer = { kid: key.kid, name: key.name, origin: key.origin };
  if (check.receipt.source !== row.source || check.receipt.run !== row.run) {
    return { ok: false, reason: 'The receipt belongs to another run', sha256 };
  }
  return { ok: true, receipt: check.receipt, signer, sha256 };
}

/** Whether the merge queue may take the run: a pull request, a signed receipt of it, a verdict its policy takes. */
export function checkRunReceipt(deps: ControlDeps, row: RunRow): ReceiptVerdict {
  if (!row.pr_url) return { ok: false, reason: `Run ${row.source}/${row.run} has no pull request` };
  const signed = checkSignedReceipt(deps, row);
  if (!signed.ok) return signed;
  let policy: Policy;
  try {
    policy = row.repo_path ? loadPolicyFile(row.repo_path).policy : DEFAULT_POLICY;
  } catch (err) {
    return { ok: false, reason: `Policy: ${errorMessage(err)}` };
  }
  if (!verdictAccepted(policy, signed.receipt.verdict)) {
    const reason = `Verdict ${signed.receipt.verdict} is not accepted by the policy (pr.open = "${policy.pr.open}")`;
    return { ok: false, reason };
  }
  return signed;
}
