// A run's diff as svc's git makes it: the patch (kept whole up to a cap, always hashed) and its files' counts, between
// two commits or from a base to the working tree. The finish phase and the pod's signer enter it; it starts no git of
// its own but through git.ts, whose rules hold for every git svc runs.
import { closeSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { createHash, hash } from 'node:crypto';
import { withScratch } from '../spawn/svc-paths.ts';
import { git, withWorkingIndex, type GitIn, type GitRun, type TreeGit } from './git.ts';

export type DiffResult = ReturnType<typeof runDiff>;
export type DiffFile = DiffResult['files'][number];

/** A larger patch is not kept whole: the receipt and diffstat.json still list its files and hash it. */
const PATCH_CAP = 32 * 1024 * 1024;

/** The patch git wrote and its sha256; past the cap it is hashed a piece at a time, never held (the agent's files
 * make it: gigabytes, past what one read can return). */
function readPatch(path: string): { bytes: Buffer | null; size: number; patch_sha256: string } {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size <= PATCH_CAP) {
      const bytes = readFileSync(fd);
      return { bytes, size, patch_sha256: hash('sha256', bytes, 'hex') };
    }
    const digest = createHash('sha256');
    const piece = Buffer.alloc(1024 * 1024);
    for (let n = readSync(fd, piece); n > 0; n = readSync(fd, piece)) digest.update(piece.subarray(0, n));
    return { bytes: null, size, patch_sha256: digest.digest('hex') };
  } finally {
    closeSync(fd);
  }
}

function runDiff(inTmp: GitIn, tmp: string, opts: string[], revs: string[]) {
  // --no-ext-diff / --no-textconv: diff drivers are programs named by repository config, like hooks.
  const diff = ['diff', '--no-ext-diff', '--no-textconv', ...opts];
  const patchFile = join(tmp, 'patch');
  inTmp([...diff, '--binary', `--output=${patchFile}`, ...revs]);
  const count = (n: string) => (n === '-' ? 0 : Number(n));
  const files = inTmp([...diff, '--numstat', ...revs]).split('\n').filter((l) => l.trim()).map((l) => {
    const [ins = '0', del = '0', ...rest] = l.split('\t');
    return { path: rest.join('\t'), insertions: count(ins), deletions: count(del) };
  });
  const { bytes, size, patch_sha256 } = readPatch(patchFile);
  const patch = bytes !== null ? bytes.toString('utf8')
    : `# svc: the patch is ${size} bytes, more than the ${PATCH_CAP}-byte cap; it is not kept here.\n` +
      `# Its files are in diffstat.json; its sha256 is ${patch_sha256}.\n`;
  return {
    files,
    insertions: files.reduce((n, f) => n + f.insertions, 0),
    deletions: files.reduce((n, f) => n + f.deletions, 0),
    patch,
    patch_sha256,
  };
}

/** No change: a run's diff until svc establishes one, or when svc's git could not read the tree the agent left. */
export function emptyDiff(): DiffResult {
  const patch_sha256 = hash('sha256', '', 'hex');
  return { files: [], insertions: 0, deletions: 0, patch: '', patch_sha256 };
}

/** Between two commits, gitlink moves too (`Subproject commit` lines: ids only; a pushed branch carries them). */
export function diffCommits(dir: string, base: string, head: string, run: GitRun): DiffResult {
  return withScratch('diff', (tmp) => runDiff((args) => git(dir, args, {}, run, [tmp]), tmp,
    ['--ignore-submodules=none', '--submodule=short'], [base, head]));
}

/** Diff of the working tree (embedded repositories left out) against base (a commit or a tree). */
export function diffWorkingTree(tree: TreeGit, base: string): DiffResult {
  return withWorkingIndex(tree, base, null,
    (inTmp, tmp) => runDiff(inTmp, tmp, ['--ignore-submodules=all', '--cached'], [base]));
}
