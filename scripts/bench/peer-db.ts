// `node scripts/bench/peer-db.ts [FILL] [DELIVERIES] [DIST…]`: the job queue's database work for the peer row's
// deliveries in-process, for one build or several (each DIST a build's dist/ directory; default this tree's): a
// fresh trigger DB filled with FILL (default 50,000) deliveries, then DELIVERIES (default 30,000) more, 12 per
// COMMIT (the row's average), each with a job row, a reply target and the `/webhook` route's two dedupe keys. Prints
// the process CPU and the WAL frames per delivery (no checkpoint runs meanwhile, so the WAL holds every frame): the
// schema's cost without HTTP, the log or a neighbour's noise on the server figure.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { hash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { EnqueueRequest } from '../../src/trigger/queue.ts';

type Open = typeof import('../../src/db/open.ts');
type Migrations = typeof import('../../src/db/trigger-migrations.ts');
type Stores = typeof import('../../src/db/trigger-stores.ts');
type Queue = typeof import('../../src/trigger/queue.ts');

const args = process.argv.slice(2);
const fill = Number(args[0] ?? 50_000);
const deliveries = Number(args[1] ?? 30_000);
const dists = args.slice(2).map((d) => resolve(d));
if (dists.length === 0) dists.push(fileURLToPath(new URL('../../dist', import.meta.url)));
const PAGE = 4096;
const FRAME_HEADER = 24;
const PER_COMMIT = 12;

const brief = `Issue #1234 in acme/api: ${'fix the flaky test in the parser module '.repeat(6)}`;
let n = 0;
function delivery(): EnqueueRequest {
  const h = hash('sha256', String(++n), 'hex');
  const id = `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
  return {
    origin: 'webhook', repo: 'acme/api', brief, args: ['start', '--brief', brief, '--detach', '--repo', 'acme/api'],
    dedupeKeys: [`webhook:body:${h}`, `webhook:delivery:${id}`],
    reply: { channel: 'github', target: { repo: 'acme/api', issue: 1234, kind: 'issue' } },
  };
}

for (const dist of dists) {
  const { openDatabase } = await import(join(dist, 'db/open.js')) as Open;
  const { triggerMigrations } = await import(join(dist, 'db/trigger-migrations.js')) as Migrations;
  const { createTriggerStores } = await import(join(dist, 'db/trigger-stores.js')) as Stores;
  const { createJobQueue } = await import(join(dist, 'trigger/queue.js')) as Queue;
  const dir = mkdtempSync(join(tmpdir(), 'svc-peer-db-'));
  try {
    const path = join(dir, 'trigger.db');
    const db = openDatabase(path, triggerMigrations);
    db.exec('PRAGMA wal_autocheckpoint = 0');
    const stores = createTriggerStores(db);
    stores.jobs.countOrigins(['webhook']);
    const queue = createJobQueue({ stores, clock: Date.now, maxQueued: 100_000_000, onEnqueued() {} });
    const run = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i += PER_COMMIT) {
        await Promise.all(Array.from({ length: PER_COMMIT }, () => queue.enqueue(delivery())));
      }
    };
    await run(fill);
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    const wal = (): number => statSync(`${path}-wal`).size;
    const [before, cpu] = [wal(), process.cpuUsage()];
    await run(deliveries);
    const used = process.cpuUsage(cpu);
    const frames = (wal() - before) / (PAGE + FRAME_HEADER);
    const us = (used.user + used.system) / deliveries;
    process.stdout.write(`${dist}: ${us.toFixed(2)} µs, ${(frames / deliveries).toFixed(2)} WAL frames per delivery\n`);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
