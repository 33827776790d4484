// `node scripts/bench/profile-summary.ts FILE.cpuprofile [N]`: top N functions by self time and by
// inclusive time, so a hot path can be read without opening DevTools.
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: profile-summary.ts FILE.cpuprofile [N]\n');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Node[] };
const top = Number(topArg ?? 25);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const label = (n: Node): string => `${n.callFrame.functionName || '(anonymous)'} ` +
  `${n.callFrame.url.replace(/^.*\/(src|node:)/, '$1')}:${n.callFrame.lineNumber + 1}`;
const self = new Map<string, number>();
const inclusive = new Map<string, number>();
let total = 0;
for (const n of profile.nodes) {
  const hits = n.hitCount ?? 0;
  if (!hits) continue;
  total += hits;
  self.set(label(n), (self.get(label(n)) ?? 0) + hits);
  const seen = new Set<string>();
  for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
    const l = label(byId.get(id)!);
    if (seen.has(l)) continue;
    seen.add(l);
    inclusive.set(l, (inclusive.get(l) ?? 0) + hits);
  }
}
function print(title: string, map: Map<string, number>): void {
  process.stdout.write(`\n${title}\n`);
  for (const [name, hits] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    process.stdout.write(`${((100 * hits) / total).toFixed(1).padStart(5)}%  ${name}\n`);
  }
}
print('self time', self);
print('inclusive time', inclusive);
