// @ts-check
// Parses a unified git diff (diff.patch, untrusted text) into files, hunks and numbered lines. Pure, so it is
// unit-tested in Node; it never builds markup (diff-view.js renders through the escaping template).
// `git diff --binary` output is understood: a binary file's base85 body is skipped and the file is marked binary.

/**
 * @typedef {{kind: 'context' | 'add' | 'del' | 'note', old: number | null, new: number | null, text: string}} DiffLine
 */
/** @typedef {{header: string, lines: DiffLine[]}} Hunk */
/**
 * @typedef {{path: string, oldPath: string | null, status: 'modified' | 'added' | 'deleted' | 'renamed',
 *   binary: boolean, additions: number, deletions: number, hunks: Hunk[]}} DiffFile
 */

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$/;

/**
 * "a/src/x.ts" → "src/x.ts"; "/dev/null" → null. Quoted git paths are unquoted only as far as \" and \\.
 * @param {string} raw
 */
function stripPrefix(raw) {
  let p = raw.replace(/\t.*$/, '');
  if (p.startsWith('"') && p.endsWith('"')) p = p.slice(1, -1).replace(/\\(["\\])/g, '$1');
  if (p === '/dev/null') return null;
  return p.replace(/^[ab]\//, '');
}

/**
 * Paths from "diff --git a/x b/x" (used when there are no ---/+++ lines, e.g. binary or mode-only changes).
 * @param {string} rest
 */
function gitLinePath(rest) {
  const m = /^"?a\/(.*?)"? "?b\/(.*?)"?$/.exec(rest);
  return m ? (m[2] ?? m[1] ?? rest) : rest;
}

/** @param {string} patch @returns {DiffFile[]} */
export function parseDiff(patch) {
  /** @type {DiffFile[]} */
  const files = [];
  /** @type {DiffFile | null} */
  let file = null;
  /** @type {Hunk | null} */
  let hunk = null;
  let oldLeft = 0;
  let newLeft = 0;
  let oldNo = 0;
  let newNo = 0;
  let inBinary = false;
  const lines = patch.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  for (const raw of lines) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (hunk && (oldLeft > 0 || newLeft > 0 || line.startsWith('\\'))) {
      const c = line[0];
      if (c === '+') {
        hunk.lines.push({ kind: 'add', old: null, new: newNo++, text: line.slice(1) });
        newLeft--;
        /** @type {DiffFile} */ (file).additions++;
        continue;
      }
      if (c === '-') {
        hunk.lines.push({ kind: 'del', old: oldNo++, new: null, text: line.slice(1) });
        oldLeft--;
        /** @type {DiffFile} */ (file).deletions++;
        continue;
      }
      if (c === '\\') {
        hunk.lines.push({ kind: 'note', old: null, new: null, text: line.slice(1).trim() });
        continue;
      }
      if (c === ' ' || line === '') {
        hunk.lines.push({ kind: 'context', old: oldNo++, new: newNo++, text: line.slice(1) });
        oldLeft--;
        newLeft--;
        continue;
      }
      // Anything else ends the hunk early (a truncated patch); it is read as a header line below.
    }
    hunk = null;
    if (line.startsWith('diff --git ')) {
      file = {
        path: gitLinePath(line.slice(11)), oldPath: null, status: 'modified', binary: false,
        additions: 0, deletions: 0, hunks: [],
      };
      files.push(file);
      inBinary = false;
      continue;
    }
    if (!file) continue; // Text before the first file (a commit message, say) is not part of any file.
    if (inBinary) continue;
    const m = HUNK.exec(line);
    if (m) {
      oldNo = Number(m[1]);
      newNo = Number(m[3]);
      oldLeft = m[2] === undefined ? 1 : Number(m[2]);
      newLeft = m[4] === undefined ? 1 : Number(m[4]);
      hunk = { header: line, lines: [] };
      file.hunks.push(hunk);
      continue;
    }
    if (line.startsWith('new file mode')) file.status = 'added';
    else if (line.startsWith('deleted file mode')) file.status = 'deleted';
    else if (line.startsWith('rename from ')) {
      file.status = 'renamed';
      file.oldPath = line.slice(12);
    } else if (line.startsWith('rename to ')) file.path = line.slice(10);
    else if (line.startsWith('--- ')) {
      const p = stripPrefix(line.slice(4));
      if (p !== null && file.status === 'renamed') file.oldPath = p;
    } else if (line.startsWith('+++ ')) {
      const p = stripPrefix(line.slice(4));
      if (p !== null) file.path = p;
    } else if (line.startsWith('GIT binary patch') || (line.startsWith('Binary files ') && line.endsWith(' differ'))) {
      file.binary = true;
      inBinary = line.startsWith('GIT binary patch');
    }
  }
  return files;
}

/** Lines a file shows when expanded (its size for "collapse large files"). @param {DiffFile} f */
export function lineCount(f) {
  return f.hunks.reduce((n, h) => n + h.lines.length + 1, 0);
}
