// Deploy records under .svc/deploys/*.json: the engine reads and records them, never deploys.
import { join } from 'node:path';
import { makePlainPath, withDir, writeJsonAtomic } from './safe-fs.ts';
import { oneLine } from '../one-line.ts';
import { BadInputError } from '../errors.ts';
import { openPlainPath, pathIn, plainNames, readPlainIn } from './plain-tree.ts';
import { realOrNull } from '../spawn/tree.ts';
import { tryParseJson } from '../untrusted.ts';

interface DeployRecord {
  sha: string;
  finished_at: string;
  health: string;
}

function parseRecord(raw: unknown): DeployRecord | null {
  const o = raw as Partial<DeployRecord> | null;
  if (!o || typeof o.sha !== 'string' || !/^[0-9a-f]{7,64}$/i.test(o.sha)) return null;
  if (typeof o.finished_at !== 'string' || Number.isNaN(Date.parse(o.finished_at))) return null;
  const health = typeof o.health === 'string' ? o.health : 'unknown';
  return { sha: o.sha.toLowerCase(), finished_at: o.finished_at, health };
}

/** A deploy record is a few short fields; anything larger is not one `svc deploy` wrote. */
const MAX_RECORD = 64 * 1024;

// Only the last records by name are read: `svc deploy record` names each after its finished_at, so they are the
// newest, and a repository that commits 50,000 tiny records costs the trigger server one listing, not 50,000 reads.
export const DEPLOY_RECORDS_READ = 100;

/** `last deploy <sha7> <finished_at> health=<status>` for the newest of the last DEPLOY_RECORDS_READ records by name,
 * or null when there is none. Read as the engine reads a repository's files (plain-tree.ts): the trigger server reads
 * them while it answers a webhook, so a link to /dev/zero or a FIFO there is skipped, never read. */
export async function latestDeployLine(repoDir: string): Promise<string | null> {
  const real = realOrNull(repoDir); // the checkout's own path is the operator's, and may be a link
  if (real === null) return null;
  const dir = openPlainPath(real, ['.svc', 'deploys']);
  if ('failed' in dir) return null;
  const out: DeployRecord[] = [];
  try {
    const names = (await plainNames(dir)).filter((name) => name.endsWith('.json')).sort();
    for (const name of names.slice(-DEPLOY_RECORDS_READ)) {
      // What is not a regular file reached through no link comes back as its kind, and is skipped.
      const raw = readPlainIn(dir, name, MAX_RECORD);
      // A broken record is skipped; the others still tell the story.
      const record = typeof raw === 'string' ? null : parseRecord(tryParseJson(raw.toString('utf8')));
      if (record) out.push(record);
    }
  } finally {
    dir.close();
  }
  const latest = out.sort((a, b) => Date.parse(b.finished_at) - Date.parse(a.finished_at))[0];
  if (!latest) return null;
  const health = oneLine(latest.health, 40).replace(/\s+/g, '_') || 'unknown';
  return `last deploy ${latest.sha.slice(0, 7)} ${new Date(latest.finished_at).toISOString()} health=${health}`;
}

export function recordDeploy(repoDir: string, input: { sha: string; health: string; finished_at?: string }): string {
  const finishedAt = input.finished_at ?? new Date().toISOString();
  const record = parseRecord({ sha: input.sha, health: input.health, finished_at: finishedAt });
  // Each value named by the flag that gave it (`svc deploy record` is the one caller): one message for both blamed
  // the time for a short sha.
  if (!record && !/^[0-9a-f]{7,64}$/i.test(input.sha)) {
    throw new BadInputError(`--sha ${JSON.stringify(input.sha)} is not a commit sha: 7 to 64 hex digits`);
  }
  if (!record) {
    throw new BadInputError(`--finished-at ${JSON.stringify(finishedAt)} is not a date and time ` +
      '(ISO-8601, e.g. 2026-11-29T12:00:00Z)');
  }
  // Named by the time in ISO form, whatever form --finished-at took (an RFC 2822 date's name would sort by weekday), so
  // every record svc writes sorts by time and latestDeployLine's last names are the newest.
  const iso = new Date(record.finished_at).toISOString();
  const name = `${iso.replace(/[^0-9A-Za-z]/g, '')}-${record.sha.slice(0, 12)}.json`;
  // A repository may commit .svc/deploys as a link: the record is never written where it points.
  withDir(makePlainPath(repoDir, ['.svc', 'deploys'], 0o777), (dir) => writeJsonAtomic(pathIn(dir, name), record));
  return join(repoDir, '.svc', 'deploys', name);
}
