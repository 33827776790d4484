// The runs svc made in a checkout, read without following a link, skipping run folders git tracks.
import { tryGit } from './git.ts';
import { isValidSegment } from './ids.ts';
import { listPlain, openPlainDirIn, openPlainPath, readObjectIn } from './plain-tree.ts';
import type { RunState } from './run-state.ts';

export type Found = { run: string; state: RunState };

/** The names under `<repo>/<folder>` that git tracks anything in: the repository's own content, never svc's. */
export function trackedNames(repo: string, folder: string): Set<string> {
  const depth = folder.split('/').length;
  const files = tryGit(repo, ['ls-files', '-z', '--', folder]).split('\0');
  return new Set(files.map((f) => f.split('/')[depth]).filter((name): name is string => Boolean(name)));
}

/** The run states svc wrote in `<repo>/.svc/runs`: objects naming their folder's run, with a string status. */
export function localRuns(repo: string): Found[] {
  const runs = openPlainPath(repo, ['.svc', 'runs']);
  if ('failed' in runs) return [];
  const tracked = trackedNames(repo, '.svc/runs');
  const found: Found[] = [];
  try {
    for (const entry of listPlain(runs)) {
      if (entry.kind !== 'dir' || !isValidSegment(entry.name) || tracked.has(entry.name)) continue;
      const dir = openPlainDirIn(runs, entry.name);
      if (typeof dir === 'string') continue;
      try {
        // Not a JSON object, or one not naming its folder's run: not a run svc wrote.
        const state = readObjectIn(dir, 'state.json', () => undefined);
        if (state?.run === entry.name && typeof state.status === 'string') {
          found.push({ run: entry.name, state: state as unknown as RunState });
        }
      } catch {
        // unreadable: not a run svc wrote either
      } finally {
        dir.close();
      }
    }
  } finally {
    runs.close();
  }
  return found;
}
