// The durable job queue's group commit, its failure isolation, and the hot-path helpers around it
// (coalesced log writes, pooled job-id randomness).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Db } from '../../src/db/open.ts';
import { createTriggerStores } from '../../src/db/trigger-stores.ts';
import { createJobQueue, MAX_BATCH, type JobQueue } from '../../src/trigger/queue.ts';
import { type EnqueueRequest } from '../../src/trigger/delivery.ts';
import { createCoalescingSink } from '../../src/trigger/log-sink.ts';
import { newJobId, JOB_ID } from '../../src/trigger/job-id.ts';
import { tempTriggerDbs } from './temp-dbs.ts';

const temp = tempTriggerDbs('svc-queue-');

/** A queue over a fresh file DB. */
async function setup(maxQueued = 1000, routes = 1): Promise<{ queue: JobQueue; db: Db; commits: () => number }> {
  const { db } = temp.open();
  let commits = 0;
  const queue = createJobQueue({
    stores: createTriggerStores(db), clock: Date.now, maxQueued, routes, onEnqueued() {},
    onCommitted: () => void (commits += 1),
  });
  return { queue, db, commits: () => commits };
}

function delivery(n: number, target: Record<string, unknown> = { issue_key: `K-${n}` }): EnqueueRequest {
  return { origin: 'trackerb', repo: 'acme/api', brief: `K-${n}: fix it`, args: ['start', '--brief', `K-${n}: fix it`, '--detach'], dedupeKeys: [`trackerb:body:${n}`, `trackerb:delivery:${n}`], reply: { channel: 'trackerb', target } };
}

function count(db: Db, table: string): number {
  return (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
}

describe('job queue group commit', () => {
  it('commits the deliveries of one event-loop turn together and answers each with its own job', async () => {
    const { queue, commits } = await setup(1000);
    const results = await Promise.all([1, 2, 3].map((n) => queue.enqueue(delivery(n))));
    assert.equal(commits(), 1);
    assert.deepEqual(results.map((r) => r.kind), ['queued', 'queued', 'queued']);
    const ids = results.map((r) => (r.kind === 'queued' ? r.jobId : ''));
    assert.equal(new Set(ids).size, 3);
    for (const id of ids) assert.equal(queue.get(id)?.status, 'queued');
  });

  it('answers a retry of a delivery in the same turn as a duplicate of the first', async () => {
    const { queue } = await setup(1000);
    const [first, second] = await Promise.all([queue.enqueue(delivery(7)), queue.enqueue(delivery(7))]);
    assert.equal(first?.kind, 'queued');
    assert.deepEqual(second, { kind: 'duplicate', jobId: first?.kind === 'queued' ? first.jobId : '' });
  });

  it('splits a burst larger than one batch over several commits and queues all of it', async () => {
    const { queue, db, commits } = await setup(10_000);
    const results = await Promise.all(Array.from({ length: MAX_BATCH + 5 }, (_, i) => queue.enqueue(delivery(i))));
    assert.ok(results.every((r) => r.kind === 'queued'));
    assert.ok(commits() >= 2, `${commits()} commits`);
    assert.equal(count(db, 'jobs'), MAX_BATCH + 5);
  });

  it('fails only the delivery that could not be written and still commits the others of its batch', async () => {
    const { queue, db } = await setup(1000);
    // A BigInt in the reply target makes JSON.stringify throw after the job row and its keys were inserted.
    const results = await Promise.allSettled([queue.enqueue(delivery(1)), queue.enqueue(delivery(2, { bad: 1n })), queue.enqueue(delivery(3))]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.equal(count(db, 'jobs'), 2);
    assert.equal(count(db, 'reply_targets'), 2);
    assert.equal(count(db, 'dedupe_keys'), 4);
    // Nothing of the failed delivery survived: the vendor's retry is queued, not answered as a duplicate.
    assert.equal((await queue.enqueue(delivery(2))).kind, 'queued');
  });

  it('answers full with no job once the queue holds maxQueued jobs, counting within a batch', async () => {
    const { queue } = await setup(2);
    const results = await Promise.all([1, 2, 3].map((n) => queue.enqueue(delivery(n))));
    assert.deepEqual(results.map((r) => r.kind), ['queued', 'queued', 'full']);
    assert.deepEqual(queue.depth(), { queued: 2, running: 0 });
  });

  it('keeps each route its reserve when another route took the whole pool', async () => {
    // 8 waiting jobs over 2 routes: 2 reserved each, 4 shared.
    const { queue } = await setup(8, 2);
    const flood = await Promise.all(
      Array.from({ length: 9 }, (_, n) => queue.enqueue({ ...delivery(n), origin: 'jobs' })),
    );
    assert.equal(flood.filter((r) => r.kind === 'queued').length, 6);
    const other = await Promise.all([10, 11, 12].map((n) => queue.enqueue(delivery(n))));
    assert.deepEqual(other.map((r) => r.kind), ['queued', 'queued', 'full']);
  });

  it('answers the cheap checks before any work: duplicate of a committed job, full share, else open', async () => {
    const { queue } = await setup(2);
    const first = await queue.enqueue(delivery(1));
    assert.equal(first.kind, 'queued');
    const holder = first.kind === 'queued' ? { kind: 'duplicate', jobId: first.jobId } : {};
    assert.deepEqual(await queue.admit('trackerb', ['trackerb:delivery:1']), holder);
    const open = await queue.admit('trackerb', ['trackerb:body:2']);
    assert.equal(open.kind, 'open');
    // A copy in flight waits for the first holder of its key, then sees what that one committed.
    const copy = queue.admit('trackerb', ['trackerb:body:2']);
    const second = await queue.enqueue(delivery(2));
    if (open.kind === 'open') open.release();
    assert.deepEqual(await copy, second.kind === 'queued' ? { kind: 'duplicate', jobId: second.jobId } : {});
    assert.deepEqual(await queue.admit('trackerb', ['trackerb:body:3']), { kind: 'full' });
  });
});

describe('coalescing log sink', () => {
  it('coalesces the lines of several turns into one write, in order', async () => {
    const writes: string[] = [];
    const sink = createCoalescingSink((text) => writes.push(text), { windowMs: 60_000 });
    sink.write('a\n');
    sink.write('b\n');
    await new Promise((resolve) => setImmediate(resolve));
    sink.write('c\n');
    assert.deepEqual(writes, []);
    sink.flush();
    assert.deepEqual(writes, ['a\nb\nc\n']);
  });

  it('writes what waits once its window has passed', async () => {
    const writes: string[] = [];
    const sink = createCoalescingSink((text) => writes.push(text), { windowMs: 1 });
    sink.write('a\n');
    sink.write('b\n');
    // A timer set later for longer fires after the sink's 1 ms timer, however slow the machine is.
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(writes, ['a\nb\n']);
    sink.write('c\n');
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(writes, ['a\nb\n', 'c\n']);
  });

  it('writes at once when the buffered lines reach the size cap', () => {
    const writes: string[] = [];
    const sink = createCoalescingSink((text) => writes.push(text), { windowMs: 60_000, maxChars: 10 });
    sink.write('12345\n');
    assert.deepEqual(writes, []);
    sink.write('67890\n');
    assert.deepEqual(writes, ['12345\n67890\n']);
    sink.flush();
    assert.equal(writes.length, 1);
  });

  it('writes what is buffered at once when flushed', () => {
    const writes: string[] = [];
    const sink = createCoalescingSink((text) => writes.push(text));
    sink.write('last words\n');
    sink.flush();
    assert.deepEqual(writes, ['last words\n']);
  });
});

describe('job ids', () => {
  it('stay well-formed and distinct across many refills of the random pool', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const id = newJobId(1_700_000_000_000);
      assert.match(id, JOB_ID);
      ids.add(id);
    }
    assert.equal(ids.size, 2000);
  });
});
