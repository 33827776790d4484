// One signing secret may serve several vendor accounts (a public Sentry integration, a Linear OAuth app's webhooks, a
// Jira app): a project slug, team key or project key is unique only inside one of them. With the account pinned
// (ERRTRACK_INSTALLATION_IDS, TRACKERA_ORGANIZATION_IDS, TRACKERB_SITES) only the named account's deliveries start or
// answer work; another's is skipped as a key served nowhere, even with a default repository (the --repo shorthand
// below is the default of every source). Signed with the real payloads: Sentry installation a8e5d37a-…, Linear
// organization c8986123-…, Jira site helloworld-test.atlassian.net.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  fixture, get, makeRepo, post, rowCount, SECRETS, sign, startTestTrigger, tempDir, withJson, type TestTrigger,
} from './helpers.ts';
import { resolveTriggerSettings } from '../../src/trigger/settings.ts';
import { BadSettingError } from '../../src/errors.ts';
import { createHttpsPoster } from '../../src/trigger/https-post.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { makeCert, startStandIn, type Cert, type StandIn } from './standins.ts';

const INSTALLATION = 'a8e5d37a-696c-4c54-adb5-b3f28d64c7de';
const ORGANIZATION = 'c8986123-11f1-4eef-8227-55102f7eac46';
const SITE = 'helloworld-test.atlassian.net';
const OTHER = '0b7c2f4e-1111-4222-8333-944455556666';

/** The fixture's assignee: the trackerb filter passes its issue. */
const ASSIGNEE = '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4';
const PINS = { ERRTRACK_INSTALLATION_IDS: INSTALLATION, TRACKERA_ORGANIZATION_IDS: ORGANIZATION, TRACKERB_SITES: SITE };

function errtrack(raw: Buffer): Record<string, string> {
  const signature = sign.hex(SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET, raw);
  return { 'errtrack-hook-signature': signature, 'errtrack-hook-resource': 'issue' };
}

function trackera(raw: Buffer): Record<string, string> {
  return { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) };
}

function trackerb(raw: Buffer): Record<string, string> {
  return { 'x-hub-signature': `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}` };
}

/** The three sources' real deliveries, each as sent from account `from` (the fixture's own when omitted). */
const deliveries = {
  errtrack(from?: string) {
    const raw = withJson('sentry-issue-created.json', (v) => {
      if (!from) return;
      (v.installation as { uuid: string }).uuid = from;
      // Another account's issue: its own id, or it would be a copy of the one queued above.
      ((v.data as { issue: { id: string } }).issue).id = '2170820242';
    });
    return { raw, headers: errtrack(raw), key: 'front-end' };
  },
  trackera(from?: string) {
    const raw = withJson('linear-issue-update.json', (v) => {
      v.webhookTimestamp = Date.now();
      if (from) v.organizationId = from;
    });
    return { raw, headers: trackera(raw), key: 'LIN' };
  },
  trackerb(from?: string) {
    const raw = withJson('jira-issue-created.json', (v) => {
      const issue = v.issue as { self: string };
      if (from) issue.self = issue.self.replace(SITE, from);
    });
    return { raw, headers: trackerb(raw), key: 'KAN' };
  },
};

const STRANGERS = { errtrack: OTHER, trackera: OTHER, trackerb: 'evil-corp.atlassian.net' } as const;

describe('POST /errtrack, /trackera and /trackerb with the vendor account pinned', () => {
  let t: TestTrigger;
  before(async () => {
    t = await startTestTrigger({ ...PINS, TRACKERB_ASSIGNEES: ASSIGNEE });
  });
  after(() => t.cleanup());

  for (const route of ['errtrack', 'trackera', 'trackerb'] as const) {
    it(`queues a /${route} delivery from the named account`, async () => {
      const { raw, headers } = deliveries[route]();
      const res = await post(`${t.url}/${route}`, raw, headers);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      assert.equal(res.body.status, 'queued');
    });

    it(`skips a /${route} delivery from another account as a key served nowhere, default or not`, async () => {
      const jobs = rowCount(t.stores.db, 'jobs');
      const { raw, headers, key } = deliveries[route](STRANGERS[route]);
      const res = await post(`${t.url}/${route}`, raw, headers);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { status: 'skipped', reason: `${route} key "${key}" is not served` });
      assert.equal(rowCount(t.stores.db, 'jobs'), jobs);
      // Logged and counted as chata's stranger is: a delivery no served repository takes.
      assert.ok(t.logs.some((l) => l.msg === 'delivery skipped: repository not served' && l.route === route
        && l.reason === `${route} key "${key}" is not served`));
    });
  }

  // A Jira issue key (KAN-22, queued above from the named site) is unique only inside its site.
  it('skips a /trackerb answer comment from another site on an issue key a job here has', async () => {
    const raw = withJson('jira-comment-created.json', (v) => {
      v.issue = { id: '10021', key: 'KAN-22', self: `https://${STRANGERS.trackerb}/rest/api/2/10021` };
      const comment = v.comment as { body: string; self: string; author: { accountId: string } };
      comment.body = '/svc answer use prod';
      comment.self = `https://${STRANGERS.trackerb}/rest/api/2/issue/10021/comment/31039`;
      comment.author.accountId = ASSIGNEE;
    });
    const res = await post(`${t.url}/trackerb`, raw, trackerb(raw));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'skipped', reason: 'event "comment_created" does not start a job' });
  });

  it('skips a /trackera answer comment from another organization without asking who wrote it', async () => {
    const raw = withJson('linear-comment-create.json', (v) => {
      v.webhookTimestamp = Date.now();
      v.organizationId = OTHER;
      (v.data as { body: string }).body = '/svc answer use prod';
    });
    const res = await post(`${t.url}/trackera`, raw, trackera(raw));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'skipped', reason: 'Comment events do not start jobs' });
  });
});

describe('POST /errtrack, /trackera and /trackerb without a pinned account', () => {
  let t: TestTrigger;
  before(async () => {
    t = await startTestTrigger({ TRACKERB_ASSIGNEES: ASSIGNEE });
  });
  after(() => t.cleanup());

  for (const route of ['errtrack', 'trackera', 'trackerb'] as const) {
    it(`queues a /${route} delivery from any account, as before`, async () => {
      const { raw, headers } = deliveries[route](STRANGERS[route]);
      const res = await post(`${t.url}/${route}`, raw, headers);
      assert.equal(res.status, 202, JSON.stringify(res.body));
    });
  }
});

// Jira issue keys (KAN-31) and comment ids are each site's own, and TRACKERB_BASE_URL is one site: with several sites
// pinned, a job's summary and question go only to its own site's issue, and an answer only from there. The stand-in
// Jira is the site TRACKERB_BASE_URL names (its host, 127.0.0.1:<port>); OTHER_SITE shares the signing secret.
describe('POST /trackerb with several sites pinned', () => {
  const OTHER_SITE = 'other-site.atlassian.net';
  const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
  let dir: string;
  let cert: Cert;
  let jira: StandIn;
  let t: TestTrigger;

  before(async () => {
    dir = tempDir('svc-sites-');
    cert = makeCert(dir);
    jira = await startStandIn(cert);
    // Only acc-member may be assigned the issue; comments are created.
    const assignable = (path: string) => (path.includes('accountId=acc-member') ? [{ accountId: 'acc-member' }] : []);
    jira.respond = (req) => (req.method === 'GET'
      ? { status: 200, body: JSON.stringify(assignable(req.path)) } : { status: 201, body: '{}' });
    t = await startTestTrigger({
      TRACKERB_SITES: `${new URL(jira.url).host},${OTHER_SITE}`, TRACKERB_BASE_URL: jira.url,
      TRACKERB_EMAIL: 'bot@example.test', TRACKERB_API_TOKEN: 'jira-token-15', SVC_TRIGGER_CONCURRENCY: '4',
    }, { post: createHttpsPoster({ ca: cert.cert }) });
  });
  after(async () => {
    await t.cleanup();
    await jira.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function deliver(body: Record<string, unknown>) {
    const raw = Buffer.from(JSON.stringify(body));
    return post(`${t.url}/trackerb`, raw, { ...trackerb(raw), 'x-atlassian-webhook-identifier': randomUUID() });
  }
  const self = (site: string, rest: string) => `https://${site}/rest/api/2/${rest}`;
  const issue = (site: string, key: string, summary: string) => deliver({
    webhookEvent: 'jira:issue_created',
    issue: { id: '10031', key, self: self(site, 'issue/10031'),
      fields: { summary, labels: ['svc'], project: { key: 'KAN' } } },
  });
  const comments = (key: string) => jira.requests.filter((r) => r.path === `/rest/api/3/issue/${key}/comment`);

  it('never posts a job of another site\'s issue on the issue of the same key at TRACKERB_BASE_URL', async () => {
    const queued = await issue(OTHER_SITE, 'KAN-31', 'fix the other site\'s login');
    assert.equal(queued.status, 202, JSON.stringify(queued.body));
    const id = queued.body.job_id as string;
    // Its run ended, and its summary was sent, skipped or never had anywhere to go.
    await waitFor(async () => (await get(`${t.url}/jobs/${id}`, bearer)).body.status === 'succeeded'
      && (t.stores.replies.get(id)?.notify_status ?? 'none') !== null, 'the job to end and its summary to be done');
    assert.deepEqual(comments('KAN-31').filter((r) => r.body.includes(id)).map((r) => r.body), []);
  });

  it('never takes an answer from another site\'s issue of the same key', async () => {
    const queued = await issue(new URL(jira.url).host, 'KAN-41', 'ask-question pick a queue');
    const id = queued.body.job_id as string;
    await waitFor(() => comments('KAN-41').find((r) => r.body.includes('waiting for an answer')), 'the question');
    const answer = (site: string, commentId: string) => deliver({
      webhookEvent: 'comment_created', issue: { key: 'KAN-41', self: self(site, 'issue/10041') },
      comment: { id: commentId, body: '/svc answer the fast queue', author: { accountId: 'acc-member' },
        created: new Date().toISOString().replace('Z', '+0000'), self: self(site, `issue/10041/comment/${commentId}`) },
    });
    const foreign = await answer(OTHER_SITE, '50001');
    assert.equal(foreign.body.status, 'skipped', JSON.stringify(foreign.body));
    // The same comment id on the job's own site is another comment: it answers.
    const own = await answer(new URL(jira.url).host, '50001');
    assert.equal(own.body.status, 'answered', JSON.stringify(own.body));
    const done = await waitFor(async () => {
      const job = (await get(`${t.url}/jobs/${id}`, bearer)).body;
      return job.status === 'succeeded' ? job : null;
    }, 'the job to end');
    assert.deepEqual((done.answers as Array<Record<string, unknown>>).map((a) => a.outcome), ['answered']);
  });
});

describe('pinned account settings', () => {
  const repo = makeRepo();
  const home = tempDir('svc-home-');
  const resolve = (env: Record<string, string>) => resolveTriggerSettings(
    { HOME: home, ...SECRETS, SVC_CONTROL_URL: 'http://127.0.0.1:9', ...env },
    { host: '127.0.0.1', port: '0', repo, db: join(home, 'trigger.db') }, repo);

  it('reads each list once, spaced around commas or not, a site in lower case', () => {
    const { orgs } = resolve({ ...PINS, TRACKERB_SITES: `${SITE}, Acme.Atlassian.net` });
    assert.deepEqual([...orgs.errtrack!], [INSTALLATION]);
    assert.deepEqual([...orgs.trackera!], [ORGANIZATION]);
    assert.deepEqual([...orgs.trackerb!], [SITE, 'acme.atlassian.net']);
    assert.equal(resolve({}).orgs.trackerb, null);
  });

  it('refuses a value of the wrong form as a bad setting naming the variable', () => {
    const bad = {
      ERRTRACK_INSTALLATION_IDS: 'front-end', TRACKERA_ORGANIZATION_IDS: `${ORGANIZATION};x`,
      TRACKERB_SITES: `https://${SITE}`,
    };
    for (const [name, value] of Object.entries(bad)) {
      assert.throws(() => resolve({ [name]: value }), (err: Error) => err instanceof BadSettingError
        && err.message.startsWith(`${name} must be `), name);
    }
  });
});

// The fixture used above must carry the account where the reader looks for it.
describe('the real payloads', () => {
  it('name their account where the readers look', () => {
    const sentry = JSON.parse(fixture('sentry-issue-created.json').toString()) as { installation: { uuid: string } };
    assert.equal(sentry.installation.uuid, INSTALLATION);
    const linear = JSON.parse(fixture('linear-issue-update.json').toString()) as { organizationId: string };
    assert.equal(linear.organizationId, ORGANIZATION);
    const jira = JSON.parse(fixture('jira-issue-created.json').toString()) as { issue: { self: string } };
    assert.equal(new URL(jira.issue.self).host, SITE);
  });
});
