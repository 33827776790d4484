// Newest deploy record under <repo>/.svc/deploys/*.json rendered as `last deploy <sha7> <finished_at> health=<status>` (spec "Resources").
// Own reader: the engine's src/engine/deploys.ts (latestDeployLine) had not landed when this was written.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

const MAX_FILES = 1000;

function timeOf(value: unknown): number | null {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string') {
    const t = Date.parse(value);
    return Number.isFinite(t) ? t : null;
  }
  return null;
}

export async function latestDeployLine(repoDir: string): Promise<string | null> {
  const dir = join(repoDir, '.svc', 'deploys');
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.json')).sort().slice(-MAX_FILES);
  } catch {
    return null;
  }
  let best: { sha: string; at: number; health: string } | null = null;
  for (const name of names) {
    try {
      const record = JSON.parse(await readFile(join(dir, name), 'utf8')) as Record<string, unknown>;
      const at = timeOf(record.finished_at);
      if (typeof record.sha !== 'string' || !/^[0-9a-f]{7,64}$/i.test(record.sha) || at === null) continue;
      if (!best || at > best.at) best = { sha: record.sha, at, health: typeof record.health === 'string' ? record.health : 'unknown' };
    } catch {
      // an unreadable record is skipped, not fatal to the brief
    }
  }
  if (!best) return null;
  return `last deploy ${best.sha.slice(0, 7).toLowerCase()} ${new Date(best.at).toISOString()} health=${best.health}`;
}
