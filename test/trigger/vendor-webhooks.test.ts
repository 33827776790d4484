// Real vendors connect as they are: each route takes its service's own signature headers (Slack, Sentry, Linear,
// Jira, Teams) beside the spec's neutral names, checked with the same secret, scheme and replay window. The bodies
// are the vendors' published payloads, byte for byte, signed the vendor's way (/work/shared/reference/
// vendor-webhooks.md gives the vectors); the clock is set to each vector's own time.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { fixture, post, rowCount, startTestTrigger, type TestTrigger, type Res } from './helpers.ts';

// The vendors' own test secrets (vendor-webhooks.md §1): Slack's docs, Linear's SDK test, Microsoft's docs sample
// key, and the Sentry client secret the reference computed its vector with.
const SLACK_SECRET = '8f742231b10e8888abcd99yyyzzz85a5';
const SLACK_TS = 1531420618;
const SLACK_SIGNATURE = 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503';
const LINEAR_SECRET = 'SECRET';
const LINEAR_SIGNATURE = '8790fcbbea809950be9198408593c2a13f7591bba6c61adb589f709b5e1b186a';
const LINEAR_TS = 1677611643000;
const SENTRY_SECRET = 'example-client-secret';
const SENTRY_SIGNATURE = 'eccba0d93d6cd71bcf17d134dc52df643fd30414626a969c57788e58f3d26454';
const TEAMS_KEY = 'vqF0En+Z0ucuRTM/01o2GuhMH3hKKk/N2bOmlM31zaA=';
const TEAMS_SIGNATURE = 'HMAC Xq0DLRXD9JoOt0XBN82+8cvmCn4xrc2+BQ2dezg0KBU=';
const TEAMS_TS = Date.parse('2017-02-01T21:10:07.437Z');
const JIRA_SECRET = 'jira-admin-webhook-secret';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

function errorCode(res: Res): string | undefined {
  return (res.body.error as { code?: string } | undefined)?.code;
}

describe('real vendors, signed their own way', () => {
  let t: TestTrigger;
  let now = Date.now();
  before(async () => {
    t = await startTestTrigger({
      CHATA_SIGNING_SECRET: SLACK_SECRET, TRACKERA_WEBHOOK_SECRET: LINEAR_SECRET,
      SVC_ERRTRACK_WEBHOOK_SECRET: SENTRY_SECRET, CHATB_SECURITY_TOKEN: TEAMS_KEY,
      TRACKERB_WEBHOOK_SECRET: JIRA_SECRET, TRACKERB_ASSIGNEES: '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4',
    }, { clock: () => now });
  });
  after(() => t.cleanup());

  describe('Slack → /chata', () => {
    const raw = fixture('slack-slash-command.txt');
    it('accepts the slash command Slack\'s docs sign, under X-Slack-Signature and X-Slack-Request-Timestamp', async () => {
      now = SLACK_TS * 1000 + 1_000;
      const headers = { ...FORM, 'x-slack-request-timestamp': String(SLACK_TS), 'x-slack-signature': SLACK_SIGNATURE };
      const res = await post(`${t.url}/chata`, raw, headers);
      // The command's text is empty: a usage reply, which only a verified delivery gets.
      assert.equal(res.status, 200);
      assert.match(res.body.text as string, /^Usage: \/svc/);
    });
    it('refuses the same delivery replayed six minutes later', async () => {
      now = (SLACK_TS + 360) * 1000;
      const headers = { ...FORM, 'x-slack-request-timestamp': String(SLACK_TS), 'x-slack-signature': SLACK_SIGNATURE };
      const res = await post(`${t.url}/chata`, raw, headers);
      assert.equal(res.status, 401);
      assert.equal(errorCode(res), 'invalid_signature');
    });
    it('logs the next step with a refusal: the clock for a stale time, the secret\'s variable for a bad signature, '
      + 'what posts there for a missing time',
      async () => {
        now = (SLACK_TS + 360) * 1000;
        const signed = { 'x-slack-request-timestamp': String(SLACK_TS), 'x-slack-signature': SLACK_SIGNATURE };
        const headers = { ...FORM, ...signed };
        t.logs.length = 0;
        assert.equal((await post(`${t.url}/chata`, raw, headers)).status, 401);
        now = SLACK_TS * 1000;
        const forged = { ...headers, 'x-slack-signature': `v0=${'0'.repeat(64)}` };
        assert.equal((await post(`${t.url}/chata`, raw, forged)).status, 401);
        const unsent = { ...FORM, 'x-slack-signature': SLACK_SIGNATURE };
        assert.equal((await post(`${t.url}/chata`, raw, unsent)).status, 401);
        const refused = t.logs.filter((l) => l.msg === 'webhook refused').map((l) => [l.reason, l.next]);
        assert.deepEqual(refused, [
          ['stale_timestamp', 'the signed time is more than 300 s from this host\'s clock: check the clock '
            + '(NTP); a delivery replayed later is refused on purpose'],
          ['bad_signature', 'check that CHATA_SIGNING_SECRET holds the secret the sender signs with, and that the '
            + 'sender posts to /chata'],
          ['missing_timestamp', 'the delivery carries no signed time, or one that is not a time: the sender always '
            + 'sends it, so this one did not come from the sender as sent (or a proxy on the way dropped or changed '
            + 'it); check what posts to /chata'],
        ]);
      });
    it('refuses a forged X-Slack-Signature and a timestamp moved to now without re-signing', async () => {
      now = SLACK_TS * 1000;
      const forged = { ...FORM, 'x-slack-request-timestamp': String(SLACK_TS), 'x-slack-signature': `v0=${'0'.repeat(64)}` };
      assert.equal((await post(`${t.url}/chata`, raw, forged)).status, 401);
      now = Date.now();
      const moved = { ...FORM, 'x-slack-request-timestamp': String(Math.floor(now / 1000)), 'x-slack-signature': SLACK_SIGNATURE };
      assert.equal((await post(`${t.url}/chata`, raw, moved)).status, 401);
    });
  });

  describe('Sentry → /errtrack', () => {
    // The reference's vector is over the compact form of the documented payload (key order kept).
    const raw = Buffer.from(JSON.stringify(JSON.parse(fixture('sentry-issue-created.json').toString('utf8'))));
    it('queues the issue.created Sentry signs under Sentry-Hook-Signature and Sentry-Hook-Resource', async () => {
      now = Date.now();
      const before = rowCount(t.stores.db, 'jobs');
      const res = await post(`${t.url}/errtrack`, raw, {
        'content-type': 'application/json', 'sentry-hook-resource': 'issue', 'sentry-hook-signature': SENTRY_SIGNATURE,
      });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      assert.equal(rowCount(t.stores.db, 'jobs'), before + 1);
    });
    it('refuses a Sentry-Hook-Signature made with another secret, and a tampered body', async () => {
      const before = rowCount(t.stores.db, 'jobs');
      const other = createHmac('sha256', 'not-the-secret').update(raw).digest('hex');
      const wrong = await post(`${t.url}/errtrack`, raw, { 'sentry-hook-resource': 'issue', 'sentry-hook-signature': other });
      assert.equal(wrong.status, 401);
      const tampered = Buffer.from(raw.toString().replace('"created"', '"created "'));
      const res = await post(`${t.url}/errtrack`, tampered, {
        'sentry-hook-resource': 'issue', 'sentry-hook-signature': SENTRY_SIGNATURE,
      });
      assert.equal(res.status, 401);
      assert.equal(rowCount(t.stores.db, 'jobs'), before);
    });
  });

  describe('Linear → /trackera', () => {
    const raw = fixture('linear-comment-create-sdk-test.json');
    it('verifies the SDK test delivery under Linear-Signature at its own time', async () => {
      now = LINEAR_TS + 1_000;
      const res = await post(`${t.url}/trackera`, raw, { 'content-type': 'application/json', 'linear-signature': LINEAR_SIGNATURE });
      // A Comment is not an issue event: skipped, which only a verified delivery gets.
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.status, 'skipped');
    });
    it('refuses it now: its signed webhookTimestamp is stale, as the SDK\'s own test expects', async () => {
      now = Date.now();
      const res = await post(`${t.url}/trackera`, raw, { 'linear-signature': LINEAR_SIGNATURE });
      assert.equal(res.status, 401);
      assert.equal(errorCode(res), 'invalid_signature');
    });
    it('dedupes on Linear-Delivery a retry re-stamped with a new webhookTimestamp, and answers the first 202', async () => {
      now = Date.now();
      const before = rowCount(t.stores.db, 'jobs');
      const issue = JSON.parse(fixture('linear-issue-update.json').toString('utf8')) as Record<string, unknown>;
      const send = (stamp: number, delivery: string) => {
        const raw = Buffer.from(JSON.stringify({ ...issue, webhookTimestamp: stamp }));
        const signature = createHmac('sha256', LINEAR_SECRET).update(raw).digest('hex');
        return post(`${t.url}/trackera`, raw, { 'linear-signature': signature, 'linear-delivery': delivery });
      };
      assert.equal((await send(now, 'd6a1c1b2-0000-4000-8000-000000000001')).status, 202);
      const retry = await send(now + 60_000, 'd6a1c1b2-0000-4000-8000-000000000001');
      assert.equal(retry.status, 200);
      assert.equal(retry.body.status, 'duplicate');
      assert.equal(rowCount(t.stores.db, 'jobs'), before + 1);
    });
    it('refuses a Linear-Signature over other bytes', async () => {
      now = LINEAR_TS;
      const res = await post(`${t.url}/trackera`, Buffer.concat([raw, Buffer.from(' ')]), { 'linear-signature': LINEAR_SIGNATURE });
      assert.equal(res.status, 401);
    });
  });

  describe('Teams → /chatb', () => {
    const raw = fixture('teams-outgoing-webhook-message-mention.json');
    it('queues the documented message signed with the docs\' sample key (Authorization: HMAC)', async () => {
      now = TEAMS_TS + 1_000;
      const before = rowCount(t.stores.db, 'jobs');
      const res = await post(`${t.url}/chatb`, raw, { 'content-type': 'application/json', authorization: TEAMS_SIGNATURE });
      assert.equal(res.status, 200);
      assert.match(res.body.text as string, /^Queued svc job j\w{26}$/);
      assert.equal(rowCount(t.stores.db, 'jobs'), before + 1);
    });
    it('refuses it replayed ten minutes later', async () => {
      now = TEAMS_TS + 600_000;
      const res = await post(`${t.url}/chatb`, raw, { authorization: TEAMS_SIGNATURE });
      assert.equal(res.status, 401);
    });
  });

  describe('Jira → /trackerb', () => {
    it('dedupes on X-Atlassian-Webhook-Identifier, which Jira keeps across retries', async () => {
      now = Date.now();
      const before = rowCount(t.stores.db, 'jobs');
      const first = fixture('jira-issue-created.json');
      const retry = Buffer.from(JSON.stringify(JSON.parse(first.toString('utf8'))));
      assert.notDeepEqual(first, retry);
      const headers = (raw: Buffer) => ({
        'content-type': 'application/json', 'x-atlassian-webhook-identifier': 'jira-delivery-41',
        'x-hub-signature': `sha256=${createHmac('sha256', JIRA_SECRET).update(raw).digest('hex')}`,
      });
      assert.equal((await post(`${t.url}/trackerb`, first, headers(first))).status, 202);
      const again = await post(`${t.url}/trackerb`, retry, headers(retry));
      assert.equal(again.body.status, 'duplicate');
      assert.equal(rowCount(t.stores.db, 'jobs'), before + 1);
    });
  });
});
