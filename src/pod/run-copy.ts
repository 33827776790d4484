// Copies a run folder the agent could write into the signer's own before it reads any of it: regular files only,
// opened without following a link (the signer's mounts hold the key), capped; never a receipt.json.
import { RefusedError } from '../errors.ts';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { openPlainDirIn, openRunFolder, readPlainIn, walkPlainTree, type PlainDir } from '../engine/plain-tree.ts';

const FILE_CAP = 16 * 1024 * 1024;
const TOTAL_CAP = 256 * 1024 * 1024;
const MAX_DEPTH = 8;
const TOP_FILES = ['state.json', 'events.jsonl', 'spec.md', 'ship.json'];

/** Copies `from` (untrusted) to a fresh `to`; returns the number of files copied. */
export function copyRunFolder(from: string, to: string): number {
  const folder = openRunFolder(from);
  if ('failed' in folder) throw new RefusedError(`No run folder at ${from}`);
  try {
    rmSync(to, { recursive: true, force: true });
    mkdirSync(to, { recursive: true, mode: 0o700 });
    return copyFrom(folder, to);
  } finally {
    folder.close();
  }
}

function copyFrom(folder: PlainDir, to: string): number {
  let total = 0;
  let files = 0;
  const write = (dst: string, content: Buffer): void => {
    total += content.length;
    if (total > TOTAL_CAP) throw new RefusedError(`The run folder holds more than ${TOTAL_CAP} bytes`);
    mkdirSync(dirname(dst), { recursive: true, mode: 0o700 });
    writeFileSync(dst, content, { mode: 0o600, flag: 'wx' });
    files += 1;
  };
  for (const name of TOP_FILES) {
    const content = readPlainIn(folder, name, FILE_CAP);
    if (typeof content !== 'string') write(join(to, name), content);
  }
  const artifacts = openPlainDirIn(folder, 'artifacts');
  if (typeof artifacts === 'string') return files;
  try {
    walkPlainTree(artifacts, { maxFile: FILE_CAP, maxDepth: MAX_DEPTH, skip: () => {} }, ({ rel, content }) => {
      if (rel !== 'receipt.json') write(join(to, 'artifacts', ...rel.split('/')), content);
    });
  } finally {
    artifacts.close();
  }
  return files;
}
