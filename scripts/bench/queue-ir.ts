// `valgrind --tool=callgrind node scripts/bench/queue-ir.ts DIST FILL MEASURED`: a build's job queue alone (DIST, its
// dist/ folder), fed FILL and then MEASURED deliveries shaped like the peer row's (a ~400-character brief, three keys,
// a GitHub reply target) in batches of 12 per event-loop turn, the row's average per COMMIT. No server, no clock, no
// network: run it with MEASURED 0 and N, and (Ir(N) − Ir(0)) / N is the queue's instructions per delivery, a figure
// other load on the machine does not move (docs/bench-history.md, nineteenth session).
import { mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import type { createJobQueue as CreateJobQueue, EnqueueRequest } from '../../src/trigger/queue.ts';

const [dist, fill, measured] = [resolve(process.argv[2] ?? 'dist'), Number(process.argv[3]), Number(process.argv[4])];
const { openDatabase } = await import(`${dist}/db/open.js`);
const { triggerMigrations } = await import(`${dist}/db/trigger-migrations.js`);
const { createTriggerStores } = await import(`${dist}/db/trigger-stores.js`);
const { createJobQueue } = (await import(`${dist}/trigger/queue.js`)) as { createJobQueue: typeof CreateJobQueue };
const dir = mkdtempSync(join(tmpdir(), 'svc-queue-ir-'));
const db = openDatabase(join(dir, 'trigger.db'), triggerMigrations);
let now = 1_764_000_000_000;
const queue = createJobQueue({
  stores: createTriggerStores(db), clock: () => now++, maxQueued: 10_000_000, onEnqueued() {},
});
const brief = 'acme/api#1 Fix the flaky login test — '.padEnd(400, 'x');
let n = 0;

function delivery(): EnqueueRequest {
  n++;
  return {
    origin: 'webhook', repo: 'acme/api', brief, args: ['start', '--brief', brief, '--detach'],
    dedupeKeys: [`webhook:body:${n.toString(16).padStart(64, '0')}`, `webhook:delivery:${n}-uuid-0000`,
      `webhook:issue-opened-svc:${n}`],
    reply: { channel: 'webhook', target: { repo: 'acme/api', issue: n, thread: `github:acme/api#${n}` } },
  };
}

async function enqueue(count: number): Promise<void> {
  for (let i = 0; i < count; i += 12) await Promise.all(Array.from({ length: 12 }, () => queue.enqueue(delivery())));
}

try {
  await enqueue(fill);
  await enqueue(measured);
} finally {
  db.close();
  rmSync(dir, { recursive: true, force: true });
}
