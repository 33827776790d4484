// The signer's own copy of a run folder the agent could write (docs/deploy.md "Receipts from pods"), made before the
// signer reads any of it: regular files only, never through a link (the signer's mounts hold the key), capped.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { openPlainDirIn, openRunFolder, readPlainIn, walkPlainTree, withDir } from '../engine/plain-tree.ts';
import { isSignerKind, runContainerData, SIGNER_ARTIFACTS } from '../engine/run-event.ts';
import { RefusedError } from '../errors.ts';
import { obj, tryParseJson } from '../untrusted.ts';

const FILE_CAP = 16 * 1024 * 1024;
const TOTAL_CAP = 256 * 1024 * 1024;
const MAX_DEPTH = 8;
// Not the run's `run-key`: the run container's was handed to it, and the agent could read it; the signer ships with
// the key the seal step made (docs/deploy.md). Nor its `ship.json`: what it says was shipped already the signer would
// not ship, so an agent naming the signer's diff there (or an event offset past the end) kept its own diff on the
// Control Plane and the signer's events off it; the signer ships the folder from its start (events are idempotent).
const TOP_FILES = ['state.json', 'events.jsonl', 'spec.md'];
/** Artifacts the signer establishes: the agent's are never copied (the signer writes its own, or none). */
const NOT_COPIED = new Set([...SIGNER_ARTIFACTS, 'diff.patch', 'diffstat.json']);

/**
 * The agent's events.jsonl as the signer ships it, with the sealed key, whose batches ingest takes as the signer's
 * own: each line as run-event.ts keeps a run container's (one of a kind only the signer writes, isSignerKind, left
 * out, so a `receipt` or `pr` line the agent wrote stands nowhere beside the signer's; one it marks, marked), as ingest
 * takes those the run container shipped. Every other line stays as written.
 */
function agentLines(content: Buffer): Buffer {
  let changed = false;
  const lines = content.toString('utf8').split('\n').flatMap((line) => {
    const event = obj(tryParseJson(line));
    if (typeof event.kind !== 'string') return [line];
    const signers = isSignerKind(event.kind);
    const kept = signers ? null : runContainerData(event.kind, event.data);
    if (!signers && kept === event.data) return [line];
    changed = true;
    return signers ? [] : [JSON.stringify({ ...event, data: kept })];
  });
  return changed ? Buffer.from(lines.join('\n')) : content;
}

/**
 * Copies a run folder the agent could write (`from`) into a fresh `to` of the signer's before it reads any of it:
 * regular files only, opened without following a link (the signer's mounts hold the key), capped; never a receipt,
 * nor a diff the signer makes itself.
 */
export function copyRunFolder(from: string, to: string): void {
  const folder = openRunFolder(from);
  if ('failed' in folder) throw new RefusedError(`No run folder at ${from}`);
  let total = 0;
  const write = (dst: string, content: Buffer): void => {
    total += content.length;
    if (total > TOTAL_CAP) throw new RefusedError(`The run folder holds more than ${TOTAL_CAP} bytes`);
    mkdirSync(dirname(dst), { recursive: true, mode: 0o700 });
    writeFileSync(dst, content, { mode: 0o600, flag: 'wx' });
  };
  withDir(folder, () => {
    rmSync(to, { recursive: true, force: true });
    mkdirSync(to, { recursive: true, mode: 0o700 });
    for (const name of TOP_FILES) {
      const content = readPlainIn(folder, name, FILE_CAP);
      if (typeof content === 'string') continue;
      write(join(to, name), name === 'events.jsonl' ? agentLines(content) : content);
    }
    const artifacts = openPlainDirIn(folder, 'artifacts');
    if (typeof artifacts === 'string') return;
    // Links, special and oversized files are not copied: the signer reports what it signs, not these.
    withDir(artifacts, () => walkPlainTree(artifacts, { maxFile: FILE_CAP, maxDepth: MAX_DEPTH, skip: () => {} },
      ({ rel, content }) => {
        if (!NOT_COPIED.has(rel)) write(join(to, 'artifacts', ...rel.split('/')), content);
      }));
  });
}
