// A finished job's stored row is data that outlives the code that wrote it: stored summary parts that are not JSON or
// not the parts' shape still send the summary (as data), and a channel name that is no channel is skipped, so no row
// keeps a summary pending for good. Real trigger DB in a temp dir, a loopback HTTPS stand-in for the chata hooks host
// (and GitHub's API).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createHttpsPoster } from '../../src/trigger/https-post.ts';
import { openDatabase } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerStores, type TriggerStores } from '../../src/db/trigger-stores.ts';
import { createNotifier } from '../../src/trigger/notify.ts';
import type { Logger } from '../../src/log.ts';
import { chataReply } from '../../src/trigger/sources/chata.ts';
import { githubReply } from '../../src/trigger/sources/webhook.ts';
import { insertJob, tempDir } from './helpers.ts';
import { makeCert, startStandIn, type Cert, type StandIn } from './standins.ts';

const silent = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;

describe('a stored row never keeps its summary pending', () => {
  let dir: string;
  let cert: Cert;
  let hooks: StandIn;
  let stores: TriggerStores;
  let notify: ReturnType<typeof createNotifier>;
  const reports: Array<{ job_id: string | null; status: string }> = [];

  before(async () => {
    dir = tempDir('svc-notify-rows-');
    cert = makeCert(dir);
    hooks = await startStandIn(cert);
    stores = createTriggerStores(openDatabase(join(dir, 'trigger.db'), triggerMigrations));
    notify = createNotifier({
      stores, log: silent, clock: Date.now, backoffMs: 1, post: createHttpsPoster({ ca: cert.cert }),
      report: async (n) => void reports.push(n), replies: { chata: chataReply },
      config: { chataHooksPrefix: `${hooks.url}/commands/`, trackeraApiUrl: '', trackeraApiKey: undefined,
        trackerb: undefined },
    });
  });
  after(async () => {
    await hooks.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function finished(id: string, channel: string, parts: string | null): void {
    const now = Date.now();
    const reply = { channel, target: { response_url: `${hooks.url}/commands/T1/${id}` } };
    insertJob(stores, { id, origin: 'chata', brief: 'b', args: ['b'], created_at: now, repo: 'acme/api', reply });
    stores.jobs.claim(id, now);
    stores.jobs.finish(id, { status: 'succeeded', finished_at: now, exit_code: 0, summary: `summary of ${id}`,
      summary_parts: parts, error: null });
  }

  const rows: Array<[string, string | null]> = [
    ['jnotjson', 'not json'], ['jempty', ''], ['jobject', '{}'], ['jbadpiece', '[[{"text":"x"}]]'],
    ['jtwokeys', '[[{"own":"a","data":"b"}]]'], ['jnumber', '[[{"data":5}]]'], ['jnull', null],
  ];
  for (const [id, parts] of rows) {
    it(`sends the summary of a row whose stored parts are ${JSON.stringify(parts)}, as data`, async () => {
      finished(id, 'chata', parts);
      await notify(id);
      assert.equal(stores.replies.get(id)!.notify_status, 'sent');
      const sent = hooks.requests.find((r) => r.path === `/commands/T1/${id}`);
      assert.ok(sent, 'posted to its response_url');
      assert.match((JSON.parse(sent.body) as { text: string }).text, new RegExp(`summary of ${id}`));
      assert.equal(reports.find((r) => r.job_id === id)?.status, 'sent');
    });
  }

  it('sends well-formed stored parts as they are', async () => {
    finished('jgood', 'chata', '[[{"own":"done "},{"data":"<b>x</b>"}]]');
    await notify('jgood');
    const sent = hooks.requests.find((r) => r.path === '/commands/T1/jgood');
    assert.match((JSON.parse(sent!.body) as { text: string }).text, /^done /);
    assert.doesNotMatch(sent!.body, /summary of jgood/);
  });

  it('waits out a vendor\'s 429 as long as its Retry-After says, so the summary is not lost to a rate limit', async () => {
    // The vendor refuses every post within 950 ms of the first it refused (the backoff here is 1, 4, 16 ms) and asks
    // for a second: a retry that waited as asked is accepted, with 50 ms to spare for a timer that fires early, while
    // one that waited only half of it (or the backoff) is refused.
    let limitedSince: number | null = null;
    const respond = hooks.respond;
    hooks.respond = (req) => {
      if (req.path !== '/commands/T1/jlimited') return respond(req);
      limitedSince ??= Date.now();
      return Date.now() - limitedSince < 950 ? { status: 429, body: '{}', headers: { 'retry-after': '1' } }
        : { status: 200, body: '{"ok":true}' };
    };
    try {
      finished('jlimited', 'chata', null);
      await notify('jlimited');
      assert.equal(stores.replies.get('jlimited')!.notify_status, 'sent');
      assert.equal(hooks.requests.filter((r) => r.path === '/commands/T1/jlimited').length, 2);
    } finally {
      hooks.respond = respond;
    }
  });

  it('sends a GitHub summary whose send a restart may have cut off as it was: its PATCH only sets the text again',
    async () => {
      const config = { chataHooksPrefix: '', trackeraApiUrl: '', trackeraApiKey: undefined, trackerb: undefined,
        github: { apiUrl: hooks.url, token: 'gh-token' } };
      const github = createNotifier({
        stores, log: silent, clock: Date.now, backoffMs: 1, post: createHttpsPoster({ ca: cert.cert }),
        report: async () => {}, replies: { webhook: githubReply }, config,
      });
      const now = Date.now();
      // What a server killed between the vendor taking the summary and its outcome's record leaves.
      const target = { repo: 'acme/api', issue: 12, comment_id: 1200, summary_sending: true };
      insertJob(stores, { id: 'jpatch', origin: 'webhook', brief: 'b', args: ['b'], created_at: now, repo: 'acme/api',
        reply: { channel: 'webhook', target } });
      stores.jobs.claim('jpatch', now);
      stores.jobs.finish('jpatch', { status: 'succeeded', finished_at: now, exit_code: 0, summary: 'done',
        summary_parts: '[[{"own":"done"}]]', error: null });
      await github('jpatch');
      assert.equal(stores.replies.get('jpatch')!.notify_status, 'sent');
      const sent = hooks.requests.filter((r) => r.path === '/repos/acme/api/issues/comments/1200');
      assert.deepEqual(sent.map((r) => r.method), ['PATCH']);
      assert.doesNotMatch(sent[0]!.body, /svc restarted/, 'no note that it may be a repeat');
      const first = githubReply.prepare(target, [[{ own: 'done' }]], config, now);
      assert.equal(sent[0]!.body, typeof first === 'string' ? first : first.body, 'as its first send had it');
    });

  for (const channel of ['constructor', 'toString', '__proto__', 'nosuch']) {
    it(`skips a row whose channel is ${JSON.stringify(channel)} (no channel by that name)`, async () => {
      const id = `jch${channel.replace(/\W/g, '')}`;
      finished(id, channel, null);
      await notify(id);
      assert.equal(stores.replies.get(id)!.notify_status, 'skipped');
      assert.equal(hooks.requests.some((r) => r.path === `/commands/T1/${id}`), false);
    });
  }
});

describe('reply targets stored before migration 14', () => {
  it('move into their job rows: each target, its channel and whether its summary went, nothing pending twice', () => {
    const dir = tempDir('svc-replies-v13-');
    try {
      const path = join(dir, 'trigger.db');
      const v13 = openDatabase(path, triggerMigrations.slice(0, 13));
      v13.exec(`INSERT INTO jobs (id, origin, status, brief, args, created_at, finished_at) VALUES
        ('jsent', 'chata', 'succeeded', 'b', '[]', 1, 5), ('jpending', 'webhook', 'failed', 'b', '[]', 2, 6),
        ('jqueued', 'webhook', 'queued', 'b', '[]', 3, NULL), ('jnone', 'jobs', 'succeeded', 'b', '[]', 4, 7),
        ('jrunning', 'webhook', 'running', 'b', '[]', 5, NULL), ('jskipped', 'nosuch', 'failed', 'b', '[]', 6, 8)`);
      v13.exec(`INSERT INTO reply_targets (job_id, channel, target, created_at, notify_status, notified_at) VALUES
        ('jsent', 'chata', '{"response_url":"u"}', 1, 'sent', 9),
        ('jpending', 'webhook', '{"issue":12}', 2, NULL, NULL),
        ('jqueued', 'webhook', '{"issue":13}', 3, NULL, NULL),
        ('jrunning', 'webhook', '{"issue":14}', 5, NULL, NULL),
        ('jskipped', 'nosuch', '{}', 6, 'skipped', 11)`);
      v13.close();
      const db = openDatabase(path, triggerMigrations);
      const stores = createTriggerStores(db);
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'reply_targets'").all();
      assert.deepEqual(tables, []);
      assert.deepEqual({ ...stores.replies.get('jsent') },
        { job_id: 'jsent', channel: 'chata', target: { response_url: 'u' }, notify_status: 'sent' });
      assert.deepEqual(stores.replies.get('jqueued')?.target, { issue: 13 });
      assert.deepEqual({ ...stores.replies.get('jrunning') },
        { job_id: 'jrunning', channel: 'webhook', target: { issue: 14 }, notify_status: null });
      assert.equal(stores.replies.get('jskipped')?.notify_status, 'skipped');
      assert.equal(stores.replies.get('jnone'), undefined);
      const notified = db.prepare('SELECT id, notified_at FROM jobs WHERE notified_at IS NOT NULL ORDER BY id').all();
      assert.deepEqual(notified.map((r) => ({ ...r })),
        [{ id: 'jsent', notified_at: 9 }, { id: 'jskipped', notified_at: 11 }]);
      assert.deepEqual(stores.replies.listPending(), ['jpending']);
      stores.replies.markNotified('jpending', 'failed', 10);
      stores.replies.markNotified('jnone', 'sent', 10);
      assert.deepEqual(stores.replies.listPending(), []);
      assert.equal(stores.replies.get('jnone'), undefined);
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
