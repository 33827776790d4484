// An answer from a chat or tracker thread is claimed (its redeliveries told "duplicate") only once `svc answer` has
// taken or refused it: a server killed while handing it over leaves the redelivery free to answer. Real SQLite.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerStores, type TriggerStores } from '../../src/db/trigger-stores.ts';
import { createAnswerDesk, type AnswerRequest } from '../../src/trigger/answers.ts';
import type { AnswerResult } from '../../src/trigger/executor.ts';
import { silentLogger } from '../../src/log.ts';
import { insertJob, tempDir } from './helpers.ts';

describe('an answer handed to its run', () => {
  it('is claimed once `svc answer` is done: a crash in between frees the redelivery; a copy meanwhile is a duplicate', async () => {
    const dir = tempDir();
    const path = join(dir, 'trigger.db');
    const stores = createTriggerStores(openDatabase(path, triggerMigrations));
    const now = Date.now();
    insertJob(stores, {
      id: 'j1', origin: 'github', brief: 'b', args: ['b'], created_at: now, repo: 'acme/api',
      reply: { channel: 'github', target: { thread: 'github:acme/api#12' } },
    });
    stores.jobs.claim('j1', now);
    stores.jobs.setRun('j1', 'local', 'r1', null);
    stores.jobs.setLaunch('j1', dir, 'r1');
    const handed: string[] = [];
    // The first `svc answer` never returns: the server is killed (kill -9) while it runs.
    let killed = true;
    const executor = {
      async answer(_run: unknown, text: string): Promise<AnswerResult> {
        handed.push(text);
        return killed ? new Promise<never>(() => {}) : { ok: true };
      },
    };
    const desk = (s: TriggerStores) => createAnswerDesk({
      stores: s, executor, clock: Date.now, log: silentLogger, progress: async () => {}, note: async () => true,
      writeStamps: () => {},
    });
    const req: AnswerRequest = {
      origin: 'github', thread: 'github:acme/api#12', text: 'the blue one', who: 'ada', place: 'acme/api#12',
      refusal: () => null, keys: ['github:delivery-1'],
    };
    const before = desk(stores);
    void before.answer(req);
    assert.deepEqual(await before.answer(req), { kind: 'duplicate', jobId: 'j1' }, 'a copy meanwhile answers nothing');
    killed = false;
    // The restarted server: a new connection to the same file.
    const after = desk(createTriggerStores(openDatabase(path, triggerMigrations)));
    assert.equal((await after.answer(req)).kind, 'answered', 'the redelivery hands the answer over');
    assert.deepEqual(await after.answer(req), { kind: 'duplicate', jobId: 'j1' });
    assert.deepEqual(handed, ['the blue one', 'the blue one']);
  });

  it('is claimed though the database refuses the claim a while, and answered 2xx: it was delivered', async () => {
    const handed: string[] = [];
    const executor = {
      async answer(_run: unknown, text: string): Promise<AnswerResult> {
        handed.push(text);
        return { ok: true };
      },
    };
    const locked = Object.assign(new Error('database is locked'), { code: 'ERR_SQLITE_ERROR', errcode: 5 });
    for (const refusals of [2, Infinity]) {
      const dir = tempDir();
      const stores = createTriggerStores(openDatabase(join(dir, 'trigger.db'), triggerMigrations));
      const now = Date.now();
      insertJob(stores, {
        id: 'j1', origin: 'github', brief: 'b', args: ['b'], created_at: now, repo: 'acme/api',
        reply: { channel: 'github', target: { thread: 'github:acme/api#12' } },
      });
      stores.jobs.claim('j1', now);
      stores.jobs.setRun('j1', 'local', 'r1', null);
      stores.jobs.setLaunch('j1', dir, 'r1');
      // Another process holds the write lock for the first `refusals` claims.
      const claim = stores.dedupe.claim.bind(stores.dedupe);
      let refused = 0;
      stores.dedupe.claim = (...args) => {
        if (refused++ < refusals) throw locked;
        return claim(...args);
      };
      const desk = createAnswerDesk({
        stores, executor, clock: Date.now, log: silentLogger, progress: async () => {}, note: async () => true,
        writeStamps: () => {},
      });
      const req: AnswerRequest = {
        origin: 'github', thread: 'github:acme/api#12', text: `answer ${refusals}`, who: 'ada', place: 'acme/api#12',
        refusal: () => null, keys: [`github:delivery-${refusals}`],
      };
      const reply = await desk.reply(req);
      assert.equal(reply.status, 200, `${refusals} refusals`);
      assert.deepEqual(reply.body, { status: 'answered', job_id: 'j1', run: 'local/r1' });
      // Claimed (or, never taken, still held by this server): the redelivery hands nothing over again.
      assert.deepEqual(await desk.answer(req), { kind: 'duplicate', jobId: 'j1' }, `${refusals} refusals`);
      if (refusals === 2) assert.equal(stores.dedupe.holder(req.keys), 'j1', 'claimed in the database');
    }
    assert.deepEqual(handed, ['answer 2', 'answer Infinity']);
  });
});
