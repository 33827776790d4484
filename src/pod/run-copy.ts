// Copies a run folder the agent could write (the pod's shared workspace) into the signer's own folder before the
// signer reads or ships any of it: regular files only, each opened without following a symbolic link (the signer's
// mounts hold the key, and a planted link must not turn a shipped artifact into a copy of it), with size caps.
// A receipt.json found there is dropped: only the signer issues one.
import { RefusedError } from '../errors.ts';
import { lstatSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { readAgentBytes } from '../engine/safe-fs.ts';
import { join } from 'node:path';

const FILE_CAP = 16 * 1024 * 1024;
const TOTAL_CAP = 256 * 1024 * 1024;
const TOP_FILES = ['state.json', 'events.jsonl', 'spec.md', 'ship.json'];

export class RunCopyError extends RefusedError {
  constructor(message: string) {
    super(message);
  }
}

function isPlainDir(path: string): boolean {
  const st = lstatSync(path, { throwIfNoEntry: false });
  return !!st && st.isDirectory() && !st.isSymbolicLink();
}

/** Copies `from` (untrusted) to a fresh `to`; returns the number of files copied. */
export function copyRunFolder(from: string, to: string): number {
  if (!isPlainDir(from)) throw new RunCopyError(`No run folder at ${from}`);
  rmSync(to, { recursive: true, force: true });
  mkdirSync(to, { recursive: true, mode: 0o700 });
  let total = 0;
  let files = 0;
  const copy = (src: string, dst: string): void => {
    const content = readAgentBytes(src, FILE_CAP);
    if (!content) return;
    total += content.length;
    if (total > TOTAL_CAP) throw new RunCopyError(`The run folder holds more than ${TOTAL_CAP} bytes`);
    writeFileSync(dst, content, { mode: 0o600, flag: 'wx' });
    files += 1;
  };
  for (const name of TOP_FILES) copy(join(from, name), join(to, name));
  const walk = (src: string, dst: string, depth: number): void => {
    if (depth > 8 || !isPlainDir(src)) return;
    mkdirSync(dst, { recursive: true, mode: 0o700 });
    for (const name of readdirSync(src)) {
      if (depth === 0 && name === 'receipt.json') continue;
      const s = join(src, name);
      if (isPlainDir(s)) walk(s, join(dst, name), depth + 1);
      else copy(s, join(dst, name));
    }
  };
  walk(join(from, 'artifacts'), join(to, 'artifacts'), 0);
  return files;
}
