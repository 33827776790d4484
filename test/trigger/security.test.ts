import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { OWN, sign } from './helpers.ts';
import type { JobExecutor } from '../../src/trigger/executor.ts';
import { SECRETS, fixture, rowCount, withJson, post, nowSeconds, startTestTrigger, type TestTrigger, type Res } from './helpers.ts';

const stubExecutor: JobExecutor = { source: 'local', launch: async () => ({ exitCode: 1, run: null, error: 'stub' }), follow: async () => null };

interface RouteCase {
  route: string;
  /** The case's title when it is not the route's (a vendor's own headers on that route). */
  name?: string;
  /** A body that queues a job; different for every n. */
  fresh(n: number): Buffer;
  /** Valid signature headers for raw with the given secret. */
  signed(raw: Buffer, secret?: string): Record<string, string>;
  secret: string;
  /** A validly signed delivery whose timestamp is 10 minutes old. */
  stale?(n: number): { raw: Buffer; headers: Record<string, string> };
  /** Same content under a new delivery id: must still be a duplicate. */
  redeliver(raw: Buffer, first: Record<string, string>): { raw: Buffer; headers: Record<string, string> };
  okStatus: number;
}

const ago = (): number => Date.now() - 600_000;

const cases: RouteCase[] = [
  {
    route: 'errtrack',
    secret: SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET,
    // Each a new issue: alerts for one issue start one job between them.
    fresh: (n) => withJson('sentry-event-alert-triggered.json', (v) => {
      Object.assign((v.data as { event: Record<string, unknown> }).event, { event_id: `e${n}`, issue_id: `e${n}` });
    }),
    signed: (raw, secret = SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET) => ({ 'errtrack-hook-signature': sign.hex(secret, raw), 'errtrack-hook-resource': 'event_alert' }),
    redeliver: (raw, first) => ({ raw, headers: { ...first, 'request-id': 'another' } }),
    okStatus: 202,
  },
  {
    route: 'chata',
    secret: SECRETS.CHATA_SIGNING_SECRET,
    fresh: (n) => Buffer.from(fixture('slack-slash-command.txt').toString().replace('text=', `text=fix+bug+${n}`)),
    signed: (raw, secret = SECRETS.CHATA_SIGNING_SECRET) => {
      const ts = String(nowSeconds());
      return { 'content-type': 'application/x-www-form-urlencoded', 'x-chata-request-timestamp': ts, 'x-chata-signature': sign.chata(secret, raw, ts) };
    },
    stale: (n) => {
      const raw = Buffer.from(fixture('slack-slash-command.txt').toString().replace('text=', `text=old+${n}`));
      const ts = String(Math.floor(ago() / 1000));
      return { raw, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-chata-request-timestamp': ts, 'x-chata-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts) } };
    },
    // A retry a second later carries a new timestamp and signature over the same body.
    redeliver: (raw) => {
      const ts = String(nowSeconds() + 1);
      return { raw, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-chata-request-timestamp': ts, 'x-chata-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts) } };
    },
    okStatus: 200,
  },
  {
    route: 'trackera',
    secret: SECRETS.TRACKERA_WEBHOOK_SECRET,
    fresh: (n) => withJson('linear-issue-update.json', (v) => ((v.webhookTimestamp = Date.now()), ((v.data as Record<string, unknown>).title = `t${n}`))),
    signed: (raw, secret = SECRETS.TRACKERA_WEBHOOK_SECRET) => ({ 'trackera-signature': sign.hex(secret, raw) }),
    stale: () => {
      const raw = withJson('linear-issue-update.json', (v) => (v.webhookTimestamp = ago()));
      return { raw, headers: { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) } };
    },
    redeliver: (raw, first) => ({ raw, headers: { ...first, 'trackera-delivery': 'new' } }),
    okStatus: 202,
  },
  {
    route: 'trackerb',
    secret: SECRETS.TRACKERB_WEBHOOK_SECRET,
    fresh: (n) => withJson('jira-issue-created.json', (v) => ((v.issue as { fields: Record<string, unknown> }).fields.summary = `s${n}`)),
    signed: (raw, secret = SECRETS.TRACKERB_WEBHOOK_SECRET) => ({ 'x-hub-signature': `sha256=${sign.hex(secret, raw)}`, 'x-vendorb-webhook-identifier': `id-${raw.length}-${Math.random()}` }),
    redeliver: (raw, first) => ({ raw, headers: { ...first, 'x-vendorb-webhook-identifier': 'a-brand-new-id' } }),
    okStatus: 202,
  },
  {
    route: 'chatb',
    secret: SECRETS.CHATB_SECURITY_TOKEN,
    fresh: (n) => withJson('teams-outgoing-webhook-message-mention.json', (v) => ((v.id = `a${n}`), (v.timestamp = new Date().toISOString()))),
    signed: (raw, secret = SECRETS.CHATB_SECURITY_TOKEN) => ({ authorization: sign.chatb(secret, raw) }),
    stale: (n) => {
      const raw = withJson('teams-outgoing-webhook-message-mention.json', (v) => ((v.id = `old${n}`), (v.timestamp = new Date(ago()).toISOString())));
      return { raw, headers: { authorization: sign.chatb(SECRETS.CHATB_SECURITY_TOKEN, raw) } };
    },
    // Same activity id, different bytes (e.g. a re-serialised redelivery): the activity id alone dedupes it.
    redeliver: (raw) => {
      const again = Buffer.from(JSON.stringify(JSON.parse(raw.toString()), null, 1));
      return { raw: again, headers: { authorization: sign.chatb(SECRETS.CHATB_SECURITY_TOKEN, again) } };
    },
    okStatus: 200,
  },
  // The same attacks under each vendor's own header names: one secret, one check, one replay window.
  {
    route: 'errtrack',
    name: 'errtrack with Sentry\'s headers',
    secret: SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET,
    // Each a new issue: alerts for one issue start one job between them.
    fresh: (n) => withJson('sentry-event-alert-triggered.json', (v) => {
      Object.assign((v.data as { event: Record<string, unknown> }).event, { event_id: `s${n}`, issue_id: `s${n}` });
    }),
    signed: (raw, secret = SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET) => ({ 'sentry-hook-signature': sign.hex(secret, raw), 'sentry-hook-resource': 'event_alert' }),
    redeliver: (raw, first) => ({ raw, headers: { ...first, 'request-id': 'another' } }),
    okStatus: 202,
  },
  {
    route: 'chata',
    name: 'chata with Slack\'s headers',
    secret: SECRETS.CHATA_SIGNING_SECRET,
    fresh: (n) => Buffer.from(fixture('slack-slash-command.txt').toString().replace('text=', `text=slack+bug+${n}`)),
    signed: (raw, secret = SECRETS.CHATA_SIGNING_SECRET) => {
      const ts = String(nowSeconds());
      return { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': ts, 'x-slack-signature': sign.chata(secret, raw, ts) };
    },
    stale: (n) => {
      const raw = Buffer.from(fixture('slack-slash-command.txt').toString().replace('text=', `text=slack+old+${n}`));
      const ts = String(Math.floor(ago() / 1000));
      return { raw, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': ts, 'x-slack-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts) } };
    },
    redeliver: (raw) => {
      const ts = String(nowSeconds() + 1);
      return { raw, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': ts, 'x-slack-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts) } };
    },
    okStatus: 200,
  },
  {
    route: 'trackera',
    name: 'trackera with Linear\'s headers',
    secret: SECRETS.TRACKERA_WEBHOOK_SECRET,
    fresh: (n) => withJson('linear-issue-update.json', (v) => ((v.webhookTimestamp = Date.now()), ((v.data as Record<string, unknown>).title = `linear ${n}`))),
    signed: (raw, secret = SECRETS.TRACKERA_WEBHOOK_SECRET) => ({ 'linear-signature': sign.hex(secret, raw) }),
    stale: () => {
      const raw = withJson('linear-issue-update.json', (v) => ((v.webhookTimestamp = ago()), ((v.data as Record<string, unknown>).title = 'old')));
      return { raw, headers: { 'linear-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) } };
    },
    redeliver: (raw, first) => ({ raw, headers: { ...first, 'linear-delivery': 'new' } }),
    okStatus: 202,
  },
  {
    route: 'trackerb',
    name: 'trackerb with Jira\'s delivery id',
    secret: SECRETS.TRACKERB_WEBHOOK_SECRET,
    fresh: (n) => withJson('jira-issue-created.json', (v) => ((v.issue as { fields: Record<string, unknown> }).fields.summary = `jira ${n}`)),
    signed: (raw, secret = SECRETS.TRACKERB_WEBHOOK_SECRET) => ({ 'x-hub-signature': `sha256=${sign.hex(secret, raw)}`, 'x-atlassian-webhook-identifier': `id-${raw.length}-${Math.random()}` }),
    redeliver: (raw, first) => ({ raw, headers: { ...first, 'x-atlassian-webhook-identifier': 'a-brand-new-id' } }),
    okStatus: 202,
  },
  {
    route: 'webhook',
    secret: SECRETS.GITHUB_WEBHOOK_SECRET,
    fresh: (n) => Buffer.from(JSON.stringify({ action: 'labeled', label: { name: 'svc' }, issue: { number: n, title: 'x', ...OWN }, sender: OWN.user, repository: { full_name: 'acme/api' } })),
    signed: (raw, secret = SECRETS.GITHUB_WEBHOOK_SECRET) => ({ 'x-hub-signature-256': `sha256=${sign.hex(secret, raw)}`, 'x-github-event': 'issues', 'x-github-delivery': `g-${Math.random()}` }),
    redeliver: (raw, first) => ({ raw, headers: { ...first, 'x-github-delivery': 'another-delivery' } }),
    okStatus: 202,
  },
];

function assertRefused(res: Res, status: number, code: string): void {
  assert.equal(res.status, status);
  assert.deepEqual(Object.keys(res.body), ['error']);
  assert.equal((res.body.error as { code: string }).code, code);
}

/** Sends headers and half a body, then stalls: the server must give up and queue nothing. */
function trickle(url: string, path: string, raw: Buffer, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(path, url);
    const req = request(u, { method: 'POST', headers: { 'content-type': 'application/json', ...headers, 'content-length': String(raw.length) } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    req.on('error', reject);
    req.write(raw.subarray(0, Math.floor(raw.length / 2)));
  });
}

describe('security', () => {
  let t: TestTrigger;
  let n = 0;
  before(async () => {
    t = await startTestTrigger({ TRACKERB_ASSIGNEES: '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4' }, { executor: stubExecutor });
  });
  after(() => t.cleanup());

  for (const c of cases) {
    describe(c.name ?? `/${c.route}`, () => {
      it('refuses a missing signature with 401 invalid_signature and queues nothing', async () => {
        const before = rowCount(t.stores.db, 'jobs');
        const raw = c.fresh(++n);
        const headers = c.signed(raw);
        for (const name of ['errtrack-hook-signature', 'x-chata-signature', 'trackera-signature', 'x-hub-signature', 'authorization', 'x-hub-signature-256', 'sentry-hook-signature', 'x-slack-signature', 'linear-signature']) delete headers[name];
        assertRefused(await post(`${t.url}/${c.route}`, raw, headers), 401, 'invalid_signature');
        assert.equal(rowCount(t.stores.db, 'jobs'), before);
      });
      it('refuses a malformed signature and one made with the wrong secret', async () => {
        const before = rowCount(t.stores.db, 'jobs');
        const raw = c.fresh(++n);
        const good = c.signed(raw);
        const garbage = Object.fromEntries(Object.entries(good).map(([k, v]) => [k, /signature|authorization/.test(k) ? `${v.slice(0, -4)}zzzz` : v]));
        assertRefused(await post(`${t.url}/${c.route}`, raw, garbage), 401, 'invalid_signature');
        const wrong = c.route === 'chatb' ? Buffer.from('some-other-key').toString('base64') : 'not-the-secret';
        assertRefused(await post(`${t.url}/${c.route}`, raw, c.signed(raw, wrong)), 401, 'invalid_signature');
        assert.equal(rowCount(t.stores.db, 'jobs'), before);
      });
      it('refuses a tampered body', async () => {
        const before = rowCount(t.stores.db, 'jobs');
        const raw = c.fresh(++n);
        const headers = c.signed(raw);
        const tampered = Buffer.from(raw.toString().replace(/x|fix|s\d+|t\d+|Hello|heck/, (m) => `${m}!`));
        assert.notDeepEqual(tampered, raw);
        assertRefused(await post(`${t.url}/${c.route}`, tampered, headers), 401, 'invalid_signature');
        assert.equal(rowCount(t.stores.db, 'jobs'), before);
      });
      if (c.stale) {
        it('refuses a validly signed but stale delivery', async () => {
          const before = rowCount(t.stores.db, 'jobs');
          const { raw, headers } = c.stale!(++n);
          assertRefused(await post(`${t.url}/${c.route}`, raw, headers), 401, 'invalid_signature');
          assert.equal(rowCount(t.stores.db, 'jobs'), before);
        });
      }
      it('answers a repeated delivery with duplicate and queues one job', async () => {
        const before = rowCount(t.stores.db, 'jobs');
        const raw = c.fresh(++n);
        const headers = c.signed(raw);
        assert.equal((await post(`${t.url}/${c.route}`, raw, headers)).status, c.okStatus);
        const again = await post(`${t.url}/${c.route}`, raw, headers);
        assert.equal(again.status, 200);
        assert.equal(again.body.status, 'duplicate');
        assert.equal(rowCount(t.stores.db, 'jobs'), before + 1);
      });
      it('answers the same content under a new delivery id with duplicate', async () => {
        const before = rowCount(t.stores.db, 'jobs');
        const raw = c.fresh(++n);
        const headers = c.signed(raw);
        assert.equal((await post(`${t.url}/${c.route}`, raw, headers)).status, c.okStatus);
        const next = c.redeliver(raw, headers);
        const again = await post(`${t.url}/${c.route}`, next.raw, next.headers);
        assert.equal(again.body.status, 'duplicate');
        assert.equal(rowCount(t.stores.db, 'jobs'), before + 1);
      });
      it('refuses a body over 1 MiB with 413 payload_too_large', async () => {
        const before = rowCount(t.stores.db, 'jobs');
        const raw = Buffer.alloc(1024 * 1024 + 1, 0x20);
        assertRefused(await post(`${t.url}/${c.route}`, raw, c.signed(raw)), 413, 'payload_too_large');
        assert.equal(rowCount(t.stores.db, 'jobs'), before);
      });
      it('gives up on a body that trickles in, and queues nothing', async () => {
        const before = rowCount(t.stores.db, 'jobs');
        const raw = c.fresh(++n);
        assert.equal(await trickle(t.url, `/${c.route}`, raw, c.signed(raw)), 400);
        assert.equal(rowCount(t.stores.db, 'jobs'), before);
      });
    });
  }

  // A Teams message's id is the millisecond it was posted in its channel (the fixture's 1485983408511): two channels
  // of the team the outgoing webhook serves can post under one id, and neither is a copy of the other.
  it('queues /chatb messages of one activity id from two channels, and still one per channel', async () => {
    const before = rowCount(t.stores.db, 'jobs');
    const message = (channel: string, text: string) => {
      const raw = withJson('teams-outgoing-webhook-message-mention.json', (v) => {
        Object.assign(v, { id: '1700000000123', timestamp: new Date().toISOString(), text: `<at>svc</at> ${text}` });
        v.conversation = { id: `${channel};messageid=1700000000123` };
        v.channelData = { teamsChannelId: channel, teamsTeamId: '19:team@thread.skype' };
      });
      return post(`${t.url}/chatb`, raw, { authorization: sign.chatb(SECRETS.CHATB_SECURITY_TOKEN, raw) });
    };
    const first = await message('19:one@thread.skype', 'fix the login page');
    assert.match(first.body.text as string, /^Queued svc job j/);
    const other = await message('19:two@thread.skype', 'fix the billing page');
    assert.match(other.body.text as string, /^Queued svc job j/, JSON.stringify(other.body));
    const again = await message('19:one@thread.skype', 'fix the login page, re-serialised');
    assert.equal(again.body.status, 'duplicate');
    assert.equal(rowCount(t.stores.db, 'jobs'), before + 2);
  });

  describe('/jobs', () => {
    const body = (b: string): string => JSON.stringify({ brief: b });
    it('refuses a missing or wrong bearer token with 401 and WWW-Authenticate', async () => {
      const before = rowCount(t.stores.db, 'jobs');
      const none = await post(`${t.url}/jobs`, body('a'));
      assertRefused(none, 401, 'unauthorized');
      assert.equal(none.headers.get('www-authenticate'), 'Bearer');
      assertRefused(await post(`${t.url}/jobs`, body('a'), { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}x` }), 401, 'unauthorized');
      assertRefused(await post(`${t.url}/jobs`, body('a'), { authorization: `Bearer ${SECRETS.CHATA_SIGNING_SECRET}` }), 401, 'unauthorized');
      const getNone = await fetch(`${t.url}/jobs/j${'0'.repeat(26)}`);
      assert.equal(getNone.status, 401);
      assert.equal(rowCount(t.stores.db, 'jobs'), before);
    });
    it('answers a repeated body with duplicate; a new request_id makes a new job', async () => {
      const before = rowCount(t.stores.db, 'jobs');
      const auth = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
      assert.equal((await post(`${t.url}/jobs`, body('same'), auth)).status, 202);
      assert.equal((await post(`${t.url}/jobs`, body('same'), auth)).body.status, 'duplicate');
      assert.equal((await post(`${t.url}/jobs`, JSON.stringify({ brief: 'same', request_id: '2' }), auth)).status, 202);
      assert.equal(rowCount(t.stores.db, 'jobs'), before + 2);
    });
    it('refuses an oversized body and a trickling body', async () => {
      const before = rowCount(t.stores.db, 'jobs');
      const auth = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
      assertRefused(await post(`${t.url}/jobs`, Buffer.alloc(1024 * 1024 + 1, 0x20), auth), 413, 'payload_too_large');
      assert.equal(await trickle(t.url, '/jobs', Buffer.from(body('slow')), auth), 400);
      assert.equal(rowCount(t.stores.db, 'jobs'), before);
    });
  });

  describe('a set but disabled SVC_API_TOKEN', () => {
    it('closes job and metrics reads (503 naming why) instead of opening them to local callers', async () => {
      for (const env of [{ SVC_API_TOKEN: SECRETS.CHATA_SIGNING_SECRET }, { SVC_API_TOKEN: undefined, SVC_API_TOKEN_FILE: '/nonexistent/token' }]) {
        const off = await startTestTrigger(env);
        try {
          for (const path of [`/jobs/j${'0'.repeat(26)}`, '/metrics']) {
            const res = await fetch(`${off.url}${path}`);
            assert.equal(res.status, 503, `${path} with ${JSON.stringify(env)}`);
            assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'not_configured');
          }
        } finally {
          await off.cleanup();
        }
      }
    });
  });

  describe('cross-site browser requests (Fetch Metadata, the shared guard of src/http/guards.ts)', () => {
    // A page in the operator's browser posting a form or a no-cors fetch at the trigger server on this machine.
    const crossSite = { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'empty' };
    it('refuses a cross-site request before reading it, even a validly signed delivery or a good token', async () => {
      const before = rowCount(t.stores.db, 'jobs');
      const errtrack = cases.find((c) => c.route === 'errtrack')!;
      const raw = errtrack.fresh(987_654);
      assertRefused(await post(`${t.url}/errtrack`, raw, { ...errtrack.signed(raw), ...crossSite }), 403, 'forbidden_origin');
      const auth = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
      const jobs = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'from a web page' }), { ...auth, ...crossSite, 'sec-fetch-site': 'same-site' });
      assertRefused(jobs, 403, 'forbidden_origin');
      assert.equal((await fetch(`${t.url}/health`, { headers: crossSite })).status, 403);
      assert.equal(rowCount(t.stores.db, 'jobs'), before);
      assert.equal((await post(`${t.url}/errtrack`, raw, errtrack.signed(raw))).status, errtrack.okStatus);
    });
  });

  describe('every error path', () => {
    it('uses the one error envelope for 404, 405 and bad JSON after a good signature', async () => {
      assertRefused(await post(`${t.url}/nope`, '{}'), 404, 'not_found');
      const wrongMethod = await fetch(`${t.url}/errtrack`);
      assert.equal(wrongMethod.status, 405);
      assert.equal(wrongMethod.headers.get('allow'), 'POST');
      const raw = Buffer.from('{not json');
      assertRefused(await post(`${t.url}/trackerb`, raw, { 'x-hub-signature': `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}` }), 400, 'invalid_json');
    });
    it('never writes a secret into its logs', () => {
      const text = JSON.stringify(t.logs);
      for (const secret of Object.values(SECRETS)) assert.ok(!text.includes(secret));
    });
  });
});
