// The durable job queue: its group commit, the failure isolation of one delivery, its shares, and job ids.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Db } from '../../src/db/open.ts';
import { createTriggerStores, type TriggerStores } from '../../src/db/trigger-stores.ts';
import { createJobQueue, DeliveryNotCommittedError, newJobId, JOB_ID, type JobQueue } from '../../src/trigger/queue.ts';
import { type EnqueueRequest } from '../../src/trigger/queue.ts';
import { tempTriggerDbs } from './temp-dbs.ts';
import { insertJob, rowCount as count } from './helpers.ts';

const temp = tempTriggerDbs('svc-queue-');

/** A queue over a fresh file DB. */
function setup(maxQueued = 1000, routes = 1): { queue: JobQueue; db: Db; stores: TriggerStores; kicks: () => number } {
  const { db } = temp.open();
  let kicks = 0;
  const stores = createTriggerStores(db);
  const queue = createJobQueue({ stores, clock: Date.now, maxQueued, routes, onEnqueued: () => void (kicks += 1) });
  return { queue, db, stores, kicks: () => kicks };
}

function delivery(n: number): EnqueueRequest {
  return { origin: 'trackerb', repo: 'acme/api', brief: `K-${n}: fix it`, args: ['start', '--brief', `K-${n}: fix it`, '--detach'], dedupeKeys: [`trackerb:body:${n}`, `trackerb:delivery:${n}`], reply: { channel: 'trackerb', target: { issue_key: `K-${n}` } } };
}

/** The next claim of delivery `n`'s keys writes them, then fails as a write can: the keys must go with its job. */
function failClaimOnce(stores: TriggerStores, n: number): void {
  const claim = stores.dedupe.claim.bind(stores.dedupe);
  let failed = false;
  stores.dedupe.claim = (keys, jobId, at) => {
    if (failed || !keys.includes(`trackerb:body:${n}`)) return claim(keys, jobId, at);
    failed = true;
    assert.equal(claim(keys, jobId, at), undefined);
    // Not one the disk refused (those are answered 503 as themselves): a constraint the write broke.
    throw Object.assign(new Error('constraint failed'), { code: 'ERR_SQLITE_ERROR', errcode: 19 });
  };
}

/** Dedupe keys claimed: a claim's row holds its keys as a JSON array. */
const KEYS = 'dedupe_keys, json_each(dedupe_keys.keys)';

/** The kept queued counts (job_counts, queued_by_origin) against the rows themselves. */
function assertCounts(db: Db, queued: number): void {
  assert.equal(count(db, "jobs WHERE status = 'queued'"), queued);
  assert.equal((db.prepare("SELECT n FROM job_counts WHERE status = 'queued'").get() as { n: number }).n, queued);
  assert.equal((db.prepare("SELECT n FROM queued_by_origin WHERE origin = 'trackerb'").get() as { n: number }).n,
    queued);
}

describe('job queue', () => {
  it('commits the deliveries of one event-loop turn together, each with its own job, and wakes the dispatcher', async () => {
    const { queue, db, kicks } = setup(1000);
    const results = await Promise.all([1, 2, 3].map((n) => queue.enqueue(delivery(n))));
    assert.deepEqual(results.map((r) => r.kind), ['queued', 'queued', 'queued']);
    const ids = results.map((r) => (r.kind === 'queued' ? r.jobId : ''));
    assert.equal(new Set(ids).size, 3);
    for (const id of ids) assert.equal(queue.get(id)?.status, 'queued');
    assert.equal(kicks(), 1);
    assert.equal(count(db, 'jobs'), 3);
    assertCounts(db, 3);
  });

  it('answers a retry of a delivery in the same turn as a duplicate of the first', async () => {
    const { queue } = setup(1000);
    const [first, second] = await Promise.all([queue.enqueue(delivery(7)), queue.enqueue(delivery(7))]);
    assert.equal(first?.kind, 'queued');
    assert.deepEqual(second, { kind: 'duplicate', jobId: first?.kind === 'queued' ? first.jobId : '' });
  });

  it('fails only the delivery that could not be written, leaving nothing of it, and commits the rest', async () => {
    const { queue, db, stores } = setup(1000);
    failClaimOnce(stores, 2);
    const results = await Promise.allSettled([
      queue.enqueue(delivery(1)), queue.enqueue(delivery(2)), queue.enqueue(delivery(3)),
    ]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.ok(results[1]?.status === 'rejected' && results[1].reason instanceof DeliveryNotCommittedError);
    assert.equal(count(db, 'jobs'), 2);
    assert.equal(count(db, 'jobs WHERE reply_channel IS NOT NULL'), 2);
    assert.equal(count(db, KEYS), 4);
    // Counted once per COMMIT: the failed delivery's row, inserted and deleted again, is not among them.
    assertCounts(db, 2);
    // Nothing of the failed delivery survived: the vendor's retry is queued, not answered as a duplicate.
    assert.equal((await queue.enqueue(delivery(2))).kind, 'queued');
  });

  it('rolls the whole turn back when a failed delivery\'s rows cannot be removed, keeping nothing of it', async () => {
    const { queue, db, stores } = setup(1000);
    const full = Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });
    stores.jobs.remove = () => {
      throw full;
    };
    failClaimOnce(stores, 2);
    const results = await Promise.allSettled([
      queue.enqueue(delivery(1)), queue.enqueue(delivery(2)), queue.enqueue(delivery(3)),
    ]);
    // Before, the batch-mates' COMMIT kept delivery 2's job, though delivery 2 was answered as not done.
    assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected', 'rejected']);
    assert.ok(results.every((r) => r.status === 'rejected' && r.reason === full));
    assert.equal(count(db, 'jobs'), 0);
    assert.equal(count(db, KEYS), 0);
  });

  it('answers duplicate on a later key and keeps nothing of it, not even a key it claimed first', async () => {
    const { queue, db } = setup(1000);
    const first = await queue.enqueue(delivery(1));
    assert.equal(first.kind, 'queued');
    // A new body under a delivery id already taken: its body key is claimed before the delivery id is found held.
    const reused = { ...delivery(2), dedupeKeys: ['trackerb:body:2', 'trackerb:delivery:1'] };
    const holder = first.kind === 'queued' ? first.jobId : '';
    assert.deepEqual(await queue.enqueue(reused), { kind: 'duplicate', jobId: holder });
    assert.equal(count(db, 'jobs'), 1);
    assert.equal(count(db, KEYS), 2);
    assert.equal(count(db, 'jobs WHERE reply_channel IS NOT NULL'), 1);
    assertCounts(db, 1);
    // That body, delivered under its own id, is a new job, not a duplicate of one that never was.
    assert.equal((await queue.enqueue(delivery(2))).kind, 'queued');
  });

  it('answers full with no job once the queue holds maxQueued jobs, counting within a turn', async () => {
    const { queue } = setup(2);
    const results = await Promise.all([1, 2, 3].map((n) => queue.enqueue(delivery(n))));
    assert.deepEqual(results.map((r) => r.kind), ['queued', 'queued', 'full']);
    assert.deepEqual(queue.depth(), { queued: 2, running: 0 });
  });

  it('keeps each route its reserve when another route took the whole pool', async () => {
    // 8 waiting jobs over 2 routes: 2 reserved each, 4 shared.
    const { queue } = setup(8, 2);
    const flood = await Promise.all(
      Array.from({ length: 9 }, (_, n) => queue.enqueue({ ...delivery(n), origin: 'jobs' })),
    );
    assert.equal(flood.filter((r) => r.kind === 'queued').length, 6);
    const other = await Promise.all([10, 11, 12].map((n) => queue.enqueue(delivery(n))));
    assert.deepEqual(other.map((r) => r.kind), ['queued', 'queued', 'full']);
  });

  it('answers the cheap checks before any work: duplicate of a committed job, full share, else open', async () => {
    const { queue } = setup(2);
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

describe('a job row', () => {
  it('stores its brief once and gives back the exact argv, a brief repeated later in it, and rows stored whole', () => {
    const { db } = temp.open();
    const stores = createTriggerStores(db);
    const brief = 'svc/01ARUN';
    const args = ['start', '--brief', brief, '--follow-up', brief, '--detach'];
    insertJob(stores, { id: 'j1', origin: 'webhook', repo: 'acme/api', brief, args, created_at: 1 });
    const stored = (db.prepare("SELECT args FROM jobs WHERE id = 'j1'").get() as { args: string }).args;
    assert.equal(stored.split(brief).length - 1, 1, stored);
    assert.deepEqual(stores.jobs.get('j1')?.args, args);
    // A follow-up is still found by the branch its argv names.
    assert.deepEqual(stores.jobs.onPullRequestBranch('acme/api', '01ARUN').map((j) => j.id), ['j1']);
    db.prepare("INSERT INTO jobs (id, origin, status, brief, args, created_at) VALUES ('j0', 'jobs', 'queued', 'b', ?, 0)")
      .run(JSON.stringify(['start', 'b']));
    assert.deepEqual(stores.jobs.get('j0')?.args, ['start', 'b']);
  });

  it('refuses a status or notify status outside its list, and checks them with no temporary B-tree per write', () => {
    const { db } = temp.open();
    const write = db.prepare("INSERT INTO jobs (id, origin, status, brief, args, created_at, notify_status) " +
      "VALUES (?, 'jobs', ?, 'b', '[]', 1, ?)");
    const insert = (status: string, notify: string | null) => () => write.run(`j-${status}-${notify}`, status, notify);
    for (const status of ['queued', 'running', 'succeeded', 'failed', 'interrupted']) insert(status, null)();
    for (const notify of ['sent', 'failed', 'skipped']) insert('queued', notify)();
    for (const bad of [insert('done', null), insert('queued', 'lost'), insert('QUEUED', null)]) {
      assert.throws(bad, (err: Error & { errcode?: number }) => err.errcode === 275); // SQLITE_CONSTRAINT_CHECK
    }
    // SQLite builds a temporary B-tree for an IN list of more than two values each time the statement runs.
    const ops = (sql: string) => (db.prepare(`EXPLAIN ${sql}`).all() as { opcode: string }[]).map((o) => o.opcode);
    for (const sql of [
      "INSERT INTO jobs (id, origin, status, brief, args, created_at) VALUES ('j', 'jobs', 'queued', 'b', '[]', 1)",
      "UPDATE jobs SET status = 'running', notify_status = 'sent' WHERE id = 'j'",
    ]) assert.ok(!ops(sql).includes('OpenEphemeral'), sql);
  });
});

describe('job ids', () => {
  it('stay well-formed and distinct when minted in the same millisecond', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const id = newJobId(1_700_000_000_000);
      assert.match(id, JOB_ID);
      ids.add(id);
    }
    assert.equal(ids.size, 2000);
  });
  it('begin with their own time, also when times alternate (the last time\'s text is kept for the next id)', () => {
    // 1_700_000_000_000 ms is 1hf7uaq00 in JavaScript's base32 digits; in engine/ids.ts's ALPHABET, 01hf7yat00.
    const times = [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_000, 0, 1_700_000_000_000];
    const prefixes = times.map((t) => newJobId(t).slice(0, 11));
    assert.deepEqual(prefixes, ['j01hf7yat00', 'j01hf7yat01', 'j01hf7yat00', 'j0000000000', 'j01hf7yat00']);
  });
});

describe('jobs store', () => {
  it('reads a job row without its reply columns: the target (a Slack response_url) is the replies store\'s', () => {
    const { stores } = setup(1000);
    const target = { response_url: 'https://hooks.chata.example/commands/T1/secret' };
    insertJob(stores, { id: 'j1', origin: 'chata', repo: 'acme/api', brief: 'b', args: ['start'], created_at: 1,
      reply: { channel: 'chata', target } });
    const reply = ['reply_channel', 'reply_target', 'notify_status', 'notified_at'];
    const queued = [stores.jobs.get('j1'), stores.jobs.oldestQueuedIn('acme/api', 'chata')];
    assert.ok(stores.jobs.claim('j1', 2));
    for (const row of [...queued, ...stores.jobs.listRunning()]) {
      assert.equal(row?.id, 'j1');
      assert.deepEqual(Object.keys(row).filter((k) => reply.includes(k)), []);
    }
    assert.deepEqual(stores.replies.get('j1')?.target, target);
  });
});
