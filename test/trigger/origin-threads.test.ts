// A blocked run's question is posted once where its job was asked, even across a restart of the trigger server, and
// on chata a reply in the question's thread answers it. The attacks come first: the bot's own message, an edit,
// another thread, a channel not mapped, a forged, stale or replayed event. Real server on port 0 (restarted on its
// own DB and HOME), fake svc that blocks, loopback HTTPS stand-ins for the chata Web API, its hooks host and trackera.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHttpsPoster } from '../../src/trigger/https-post.ts';
import { openDatabase } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerStores } from '../../src/db/trigger-stores.ts';
import { createNotifier } from '../../src/trigger/notify.ts';
import { createAnswerDesk, type AnswerDeskOptions, type AnswerRequest } from '../../src/trigger/answers.ts';
import type { Logger } from '../../src/log.ts';
import { chataReply } from '../../src/trigger/sources/chata.ts';
import { githubReply } from '../../src/trigger/sources/webhook.ts';
import type { Delivery, NotifyConfig } from '../../src/trigger/summary.ts';
import {
  SECRETS, fixture, get, insertJob, makeRepo, nowSeconds, post, sign, startTestTrigger, tempDir, type TestTrigger,
} from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { makeCert, startStandIn, type Cert, type StandIn } from './standins.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

describe('a question is posted once, and a reply in its chata thread answers it', () => {
  let dir: string;
  let home: string;
  let cert: Cert;
  let api: StandIn;
  let hooks: StandIn;
  let trackera: StandIn;
  let repo: string;
  let reposFile: string;
  let t: TestTrigger;
  /** Each chat.postMessage the stand-in took, with the ts it answered (the message's id in its channel). */
  const posts: Array<{ body: string; ts: string }> = [];

  function mapChannels(channels: string): void {
    writeFileSync(reposFile, `acme/api checkout=${repo} chata=${channels} trackera=ASKQ\n`);
  }

  function start(): Promise<TestTrigger> {
    return startTestTrigger({
      CHATA_HOOKS_PREFIX: `${hooks.url}/commands/`,
      CHATA_BOT_TOKEN: 'xoxb-bot-21',
      CHATA_API_URL: `${api.url}/api/`,
      TRACKERA_API_URL: `${trackera.url}/graphql`,
      TRACKERA_API_KEY: 'lin-key-21',
      SVC_TRIGGER_CONCURRENCY: '16',
    }, { repo, reposFile, home, db: join(home, 'trigger.db'), post: createHttpsPoster({ ca: cert.cert }) });
  }

  before(async () => {
    dir = tempDir('svc-threads-');
    home = tempDir('svc-home-');
    cert = makeCert(dir);
    [api, hooks, trackera] = await Promise.all([startStandIn(cert), startStandIn(cert), startStandIn(cert)]);
    // chat.postMessage answers with the message's ts, its id in the channel: each post a new one.
    api.respond = (req) => {
      const ts = `1700000000.${posts.push({ body: req.body, ts: '' })}`;
      posts.at(-1)!.ts = ts;
      return { status: 200, body: JSON.stringify({ ok: true, channel: 'C1', ts }) };
    };
    trackera.respond = () => ({ status: 200, body: '{"data":{"commentCreate":{"success":true}}}' });
    repo = makeRepo('acme/api');
    reposFile = join(dir, 'repos.conf');
    mapChannels('C1');
    t = await start();
  });
  after(async () => {
    await t.cleanup();
    await Promise.all([api, hooks, trackera].map((x) => x.close()));
    rmSync(dir, { recursive: true, force: true });
    rmSync(repo, { recursive: true, force: true });
  });

  function command(text: string) {
    const raw = Buffer.from(fixture('slack-slash-command.txt').toString()
      .replace('text=', `text=${encodeURIComponent(text)}`)
      .replace('channel_id=G8PSS9T3V', 'channel_id=C1')
      .replace(/response_url=[^&]+/, `response_url=${encodeURIComponent(`${hooks.url}/commands/T1/${randomUUID()}`)}`));
    const ts = String(nowSeconds());
    return post(`${t.url}/chata`, raw, {
      'content-type': 'application/x-www-form-urlencoded', 'x-chata-request-timestamp': ts,
      'x-chata-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts),
    });
  }

  /** An Events API delivery of a message, signed as Slack signs it (or with `secret`, at `at` seconds). */
  function message(
    event: Record<string, unknown>, o: { secret?: string; at?: number; envelope?: Record<string, unknown> } = {},
  ) {
    const raw = Buffer.from(JSON.stringify({
      type: 'event_callback', team_id: 'T1', api_app_id: 'A1', event_id: `Ev${randomUUID().slice(0, 8)}`,
      event_time: nowSeconds(), ...o.envelope,
      event: { type: 'message', channel: 'C1', user: 'U2', ts: `${nowSeconds()}.000300`, ...event },
    }));
    const ts = String(o.at ?? nowSeconds());
    const signature = sign.chata(o.secret ?? SECRETS.CHATA_SIGNING_SECRET, raw, ts);
    const headers = { 'x-slack-request-timestamp': ts, 'x-slack-signature': signature };
    return { raw, send: () => post(`${t.url}/chata`, raw, headers) };
  }

  async function job(id: string): Promise<Record<string, unknown>> {
    return (await get(`${t.url}/jobs/${id}`, bearer)).body;
  }

  function answerCalls(): string[][] {
    return t.calls().filter((c) => c.args[0] === 'answer').map((c) => c.args);
  }

  /** The bot's question posts about one job. */
  function questionsOf(id: string): Array<{ text: string }> {
    return api.requests.filter((r) => r.path === '/api/chat.postMessage' && r.body.includes(id))
      .map((r) => JSON.parse(r.body) as { text: string });
  }

  async function askedInChat(brief: string): Promise<{ id: string; ts: string }> {
    const queued = await command(`ask-question ${brief}`);
    const id = /(j\w{26})/.exec(queued.body.text as string)![1]!;
    await waitFor(() => questionsOf(id)[0], 'the question in the channel');
    return { id, ts: posts.find((p) => p.body.includes(id))!.ts };
  }

  it('a reply in the question\'s thread answers it; nothing else in or around the thread does', async () => {
    const { id, ts } = await askedInChat('fix the login test');
    const question = questionsOf(id)[0]!;
    assert.equal(JSON.parse(api.requests.find((r) => r.body.includes(id))!.body).channel, 'C1');
    assert.match(question.text, /waiting for an answer/);
    assert.match(question.text, /or reply in this thread/);
    assert.equal(api.requests.find((r) => r.body.includes(id))!.headers.authorization, 'Bearer xoxb-bot-21');
    const before = answerCalls().length;

    // The bot's own message in the thread, a bot's message without a user, an edit of a reply, a reply in another
    // thread, the same thread's ts named from a channel not mapped: none is an answer, nothing is audited.
    const ignored = [
      { thread_ts: ts, bot_id: 'B1', text: 'use prod' },
      { thread_ts: ts, subtype: 'bot_message', bot_id: 'B1', user: undefined, text: 'use prod' },
      { thread_ts: ts, subtype: 'message_changed', text: 'use prod' },
      { thread_ts: ts, subtype: 'thread_broadcast', bot_id: 'B1', text: 'use prod' },
      { thread_ts: '1700000000.999', text: 'use prod' },
      { thread_ts: ts, channel: 'C9', text: 'use prod' },
      { ts, text: 'use prod' },
      // A person of another workspace in a shared (Slack Connect) channel.
      { thread_ts: ts, user: 'U8', user_team: 'T9', text: 'use prod' },
      { thread_ts: ts, user: 'U8', team: 'T9', text: 'use prod' },
    ];
    for (const event of ignored) {
      const res = await message(event).send();
      assert.equal(res.status, 200, JSON.stringify(event));
      assert.equal(res.body.status, 'skipped', JSON.stringify(event));
    }
    // In a channel another workspace started and shares with ours, Slack's envelope `team_id` is that workspace's;
    // `authorizations[0]` names the one the app is installed in, and that workspace's people still do not answer.
    const shared = { team_id: 'T9', authorizations: [{ team_id: 'T1', user_id: 'UBOT', is_bot: true }] };
    const theirs = message({ thread_ts: ts, user: 'U8', user_team: 'T9', text: 'use prod' }, { envelope: shared });
    assert.equal((await theirs.send()).body.status, 'skipped');
    // The same app installed in a workspace CHATA_TEAM_IDS does not name: its people reach no job here.
    const installed = { team_id: 'T7', authorizations: [{ team_id: 'T7', user_id: 'UBOT', is_bot: true }] };
    const stranger = message({ thread_ts: ts, user: 'U6', text: 'use prod' }, { envelope: installed });
    assert.equal((await stranger.send()).body.status, 'skipped');
    // Forged (another secret) and stale (signed 10 minutes ago): refused before anything reads them.
    assert.equal((await message({ thread_ts: ts, text: 'use prod' }, { secret: 'not-the-secret' }).send()).status, 401);
    const unsigned = message({ thread_ts: ts, text: 'use prod' });
    assert.equal((await post(`${t.url}/chata`, unsigned.raw)).status, 401);
    assert.equal((await message({ thread_ts: ts, text: 'use prod' }, { at: nowSeconds() - 600 }).send()).status, 401);
    // The channel the job was asked in, once the operator took its mapping away: refused and audited.
    mapChannels('C3');
    const unmapped = await message({ thread_ts: ts, user: 'U7', text: 'use prod' }).send();
    assert.equal(unmapped.body.status, 'refused');
    mapChannels('C1');
    assert.equal(answerCalls().length, before);

    // Sent "also to #channel" (Slack's `thread_broadcast`): still a person's reply in the thread.
    const reply = message({ thread_ts: ts, subtype: 'thread_broadcast', text: 'use staging &amp; not prod' });
    const answered = await reply.send();
    assert.equal(answered.body.status, 'answered');
    assert.equal(answered.body.job_id, id);
    const calls = answerCalls().slice(before);
    assert.deepEqual(calls.map((a) => a.slice(-1)), [['use staging & not prod']]);
    assert.ok(calls[0]!.includes('--origin=chata:U2'), calls[0]!.join(' '));
    // The same signed event again (Slack retries): answers nothing more.
    assert.equal((await reply.send()).body.status, 'duplicate');
    const done = await waitFor(async () => {
      const j = await job(id);
      return j.status === 'succeeded' ? j : null;
    }, 'the answered job to end');
    assert.deepEqual((done.answers as Array<Record<string, unknown>>).map((a) => [a.who, a.outcome, a.place]), [
      ['U7', 'refused', `chata channel C1 thread ${ts}`], ['U2', 'answered', `chata channel C1 thread ${ts}`],
    ]);
    assert.equal(answerCalls().length, before + 1);
  });

  it('a restart while questions wait posts none again; a new question of the run is posted', async () => {
    const chat = await askedInChat('pick a database');
    const raw = Buffer.from(JSON.stringify({
      action: 'create', type: 'Issue', url: 'https://linear.example/x/issue/ASKQ-8', webhookTimestamp: Date.now(),
      data: { id: 'issue-askq-8', identifier: 'ASKQ-8', title: 'pick a region', team: { key: 'ASKQ' } },
    }));
    const signature = sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw);
    const tracked = await post(`${t.url}/trackera`, raw, { 'linear-signature': signature });
    assert.equal(tracked.status, 202);
    const issue = tracked.body.job_id as string;
    const onIssue = (text: string) => trackera.requests.filter((r) => r.body.includes(issue) && r.body.includes(text));
    await waitFor(() => onIssue('waiting for an answer')[0], 'the question on the issue');
    const run = await waitFor(async () => (await job(issue)).run as { run: string } | null, 'the issue job\'s run');

    await t.close();
    t = await start();
    // The restarted server re-attached to both waiting runs and read their questions again.
    for (const id of [chat.id, issue]) {
      const seen = () => t.logs.find((l) => l.msg === 'question already posted' && l.job_id === id);
      await waitFor(seen, `the re-attached follow of ${id} to read its question`);
    }
    assert.equal(questionsOf(chat.id).length, 1);
    assert.equal(onIssue('waiting for an answer').length, 1);

    // The run asks something else: that question is posted.
    const statePath = join(repo, '.svc', 'runs', run.run, 'state.json');
    const state = JSON.parse(readFileSync(statePath, 'utf8')) as Record<string, unknown>;
    writeFileSync(`${statePath}.tmp`, JSON.stringify({ ...state, question: 'And which region: eu or us?' }));
    renameSync(`${statePath}.tmp`, statePath);
    await waitFor(() => onIssue('which region: eu or us')[0], 'the second question on the issue');
    assert.equal(onIssue('waiting for an answer').length, 2);

    // The question's message ts was kept on disk: a reply in its thread still answers it after the restart.
    const answered = await message({ thread_ts: chat.ts, user: 'U4', text: 'postgres' }).send();
    assert.equal(answered.body.status, 'answered');
    assert.equal(questionsOf(chat.id).length, 1);
  });
});

describe('chata asks a question', () => {
  const config: NotifyConfig = {
    chataHooksPrefix: 'https://hooks.example.test/', trackeraApiUrl: '', trackeraApiKey: undefined,
    trackerb: undefined, chataBot: { apiUrl: 'https://chat.example.test/api/', token: 'xoxb-12' },
  };
  const target = { response_url: 'https://hooks.example.test/T1/x', response_url_until: 1_000, channel_id: 'C1' };
  const parts = [[{ own: 'svc job j1 is waiting for an answer' }]];

  it('by the bot, in a message whose ts it keeps; by the response_url without a bot or a channel', () => {
    const asked = chataReply.ask!(target, parts, config, 0) as Delivery;
    assert.equal(asked.url.href, 'https://chat.example.test/api/chat.postMessage');
    assert.equal(JSON.parse(asked.body).channel, 'C1');
    const ts = '1700000000.000200';
    assert.deepEqual(asked.remember!(JSON.stringify({ ok: true, ts })), { question_message: ts });
    // Whatever else the API says is no message id to map a thread by.
    assert.equal(asked.remember!('{"ok":true,"ts":"C1/../x"}'), null);
    assert.equal(asked.remember!('{"ok":true}'), null);
    const noBot = { ...config, chataBot: undefined };
    for (const [t, c] of [[target, noBot], [{ ...target, channel_id: undefined }, config]]) {
      const early = chataReply.ask!(t as Record<string, unknown>, parts, c as NotifyConfig, 0) as Delivery;
      assert.equal(early.url.href, target.response_url);
      // Ephemeral: no message of the channel's, so no thread answers it.
      assert.deepEqual(early.remember!(''), { response_url_posts: 1 });
    }
  });
});

describe('a new question of a run moves its chata thread', () => {
  // The notifier and the answer desk over a real trigger DB, posting to loopback HTTPS stand-ins for the chata Web API
  // and its hooks host: the bot's post of the second question is refused (a bot not in a private channel).
  let dir: string;
  let cert: Cert;
  let api: StandIn;
  let hooks: StandIn;
  before(async () => {
    dir = tempDir('svc-thread-move-');
    cert = makeCert(dir);
    [api, hooks] = await Promise.all([startStandIn(cert), startStandIn(cert)]);
  });
  after(async () => {
    await Promise.all([api.close(), hooks.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('a late reply in the old question\'s thread answers nothing; the refused question goes by the response_url', async () => {
    const stores = createTriggerStores(openDatabase(join(dir, 'trigger.db'), triggerMigrations));
    const now = Date.now();
    const target = {
      response_url: `${hooks.url}/commands/T1/x`, response_url_until: now + 600_000, channel_id: 'C1',
      thread: 'chata:C1',
    };
    insertJob(stores, {
      id: 'j1', origin: 'chata', brief: 'b', args: ['b'], created_at: now, repo: 'acme/api',
      reply: { channel: 'chata', target },
    });
    stores.jobs.claim('j1', now);
    stores.jobs.setRun('j1', 'local', 'r1', null);
    const silent = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;
    const notifier = createNotifier({
      stores, log: silent, clock: Date.now, backoffMs: 1, post: createHttpsPoster({ ca: cert.cert }),
      report: async () => {}, replies: { chata: chataReply },
      config: {
        chataHooksPrefix: `${hooks.url}/commands/`, trackeraApiUrl: '', trackeraApiKey: undefined, trackerb: undefined,
        chataBot: { apiUrl: `${api.url}/api/`, token: 'xoxb-bot-22' },
      },
    });
    api.respond = () => ({ status: 200, body: '{"ok":true,"channel":"C1","ts":"1700000000.000001"}' });
    await notifier.progress('j1', { step: 'waiting', question: 'Q1: which database?' });
    assert.equal(stores.replies.get('j1')!.target.question_message, '1700000000.000001');

    // The run was answered elsewhere and asks again before the next look; the bot may not post any more.
    api.respond = () => ({ status: 200, body: '{"ok":false,"error":"not_in_channel"}' });
    await notifier.progress('j1', { step: 'waiting', question: 'Q2: drop the old table?' });
    assert.equal(stores.replies.get('j1')!.target.question_message, undefined);
    assert.ok(hooks.requests.some((r) => r.body.includes('Q2: drop the old table?')), 'Q2 by the response_url');

    const answered: string[] = [];
    const desk = createAnswerDesk({
      stores, log: silent, clock: Date.now, progress: async () => {}, note: async () => true,
      writeStamps: notifier.writeStamps,
      executor: { answer: async (_job, text) => { answered.push(text); return { ok: true }; } },
    } as AnswerDeskOptions);
    const late = await desk.answer({
      origin: 'chata', thread: 'chata:C1', replyTo: '1700000000.000001', who: 'U2', text: 'yes',
      refusal: () => null, place: 'chata channel C1', keys: ['late-reply'],
    } as AnswerRequest);
    assert.notEqual(late.kind, 'answered');
    assert.deepEqual(answered, []);
  });
});

describe('an answer is for the question its run waits on now', () => {
  it('a comment written for an earlier question of the job, delivered late, never answers the later one', async () => {
    const dir = tempDir('svc-late-answer-');
    try {
      const stores = createTriggerStores(openDatabase(join(dir, 'trigger.db'), triggerMigrations));
      // Queued at 10:00; asks its first question at 10:05, is answered from the Control Plane, asks again at 10:20.
      const at = (minutes: number) => Date.parse('2026-11-29T10:00:00Z') + minutes * 60_000;
      let now = at(0);
      insertJob(stores, {
        id: 'j1', origin: 'trackerb', brief: 'b', args: ['b'], created_at: now, repo: 'acme/api',
        reply: { channel: 'trackerb', target: { key: 'KAN-7', thread: 'trackerb:KAN-7' } },
      });
      stores.jobs.claim('j1', now);
      stores.jobs.setRun('j1', 'local', 'r1', null);
      stores.jobs.setLaunch('j1', dir, 'r1');
      const silent = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;
      // No channel takes its messages here: when a question was asked is kept whether or not its post went.
      const notifier = createNotifier({
        stores, log: silent, clock: () => now, backoffMs: 1, post: async () => ({ status: 500, text: '' }),
        report: async () => {}, replies: {},
        config: { chataHooksPrefix: '', trackeraApiUrl: '', trackeraApiKey: undefined, trackerb: undefined },
      });
      now = at(5);
      await notifier.progress('j1', { step: 'waiting', question: 'Q1: raise the budget to $20?' });
      now = at(20);
      await notifier.progress('j1', { step: 'waiting', question: 'Q2: may I drop the users table?' });
      const answered: string[] = [];
      const desk = createAnswerDesk({
        stores, log: silent, clock: () => now, progress: async () => {}, note: async () => true,
        writeStamps: notifier.writeStamps,
        executor: { answer: async (_run, text) => { answered.push(text); return { ok: true }; } },
      } as AnswerDeskOptions);
      const ask = (text: string, writtenAt: number, key: string) => desk.answer({
        origin: 'trackerb', thread: 'trackerb:KAN-7', who: 'acc-member', text, writtenAt, refusal: () => null,
        place: 'trackerb issue KAN-7', keys: [key],
      } as AnswerRequest);
      // "yes" written at 10:06 for Q1, its delivery retried at 10:21.
      now = at(21);
      const late = await ask('yes', at(6), 'comment-10');
      assert.equal(late.kind, 'refused');
      assert.match((late as { reason: string }).reason, /written before job j1 was queued or asked what it waits on/);
      // One written in the second Q2 was asked (a vendor's time has no finer part) answers it.
      assert.equal((await ask('no, keep it', at(20), 'comment-11')).kind, 'answered');
      assert.deepEqual(answered, ['no, keep it']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a question is dated when the run asks it, not when its post gets a turn behind one still being sent', async () => {
    const dir = tempDir('svc-asked-at-');
    let release = (): void => {};
    try {
      const stores = createTriggerStores(openDatabase(join(dir, 'trigger.db'), triggerMigrations));
      const at = (seconds: number) => Date.parse('2026-11-29T10:00:00Z') + seconds * 1000;
      let now = at(0);
      const thread = 'github:acme/api#12';
      insertJob(stores, {
        id: 'j2', origin: 'webhook', brief: 'b', args: ['b'], created_at: now, repo: 'acme/api',
        reply: { channel: 'webhook', target: { repo: 'acme/api', issue: 12, thread, comment_id: 1200 } },
      });
      stores.jobs.claim('j2', now);
      stores.jobs.setRun('j2', 'local', 'r2', null);
      stores.jobs.setLaunch('j2', dir, 'r2');
      const silent = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;
      // GitHub takes every edit of the progress comment but the one saying the first question was answered, which
      // hangs (as a slow API does, for up to its retries' minute).
      const edits: string[] = [];
      const post = async (_url: URL, _headers: unknown, body: string) => {
        edits.push(body);
        if (body.includes('answered')) await new Promise<void>((resolve) => { release = resolve; });
        return { status: 200, text: '{}' };
      };
      const notifier = createNotifier({
        stores, log: silent, clock: () => now, backoffMs: 1, post, report: async () => {},
        replies: { webhook: githubReply },
        config: { chataHooksPrefix: '', trackeraApiUrl: '', trackeraApiKey: undefined, trackerb: undefined,
          github: { apiUrl: 'https://api.github.invalid', token: 'gh-token' } },
      });
      now = at(60);
      await notifier.progress('j2', { step: 'waiting', question: 'Q1: raise the budget to $20?' });
      now = at(70);
      void notifier.progress('j2', { step: 'answered', by: 'ada' });
      await waitFor(() => edits.some((e) => e.includes('answered')), 'the hanging edit');
      now = at(72);
      void notifier.progress('j2', { step: 'waiting', question: 'Q2: may I drop the users table?' });
      const answered: string[] = [];
      const desk = createAnswerDesk({
        stores, log: silent, clock: () => now, progress: async () => {}, note: async () => true,
        writeStamps: notifier.writeStamps,
        executor: { answer: async (_run, text) => { answered.push(text); return { ok: true }; } },
      } as AnswerDeskOptions);
      // "yes" written at 10:01:08 for Q1, delivered at 10:01:13 while Q2's post still waits its turn.
      now = at(73);
      const late = await desk.answer({
        origin: 'webhook', thread, who: 'ada', text: 'yes', writtenAt: at(68), refusal: () => null,
        place: 'github acme/api#12 comment 5', keys: ['webhook:comment:5'],
      } as AnswerRequest);
      assert.equal(late.kind, 'refused');
      assert.deepEqual(answered, []);
    } finally {
      release();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
