// Fuzzes every route of the trigger server's route table: the real webhook fixtures, mutated and then
// signed with the test's secrets so they reach the handlers, plus broken HTTP. Checks no 5xx, the envelope on every
// error, no job, dedupe key, reply target or snapshot for a refused delivery, and a live server after.
// SVC_FUZZ_SEED=<seed> replays a failure; SVC_FUZZ_REQUESTS=<n> changes how many requests are sent.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sign } from './helpers.ts';
import { triggerRoutes } from '../../src/trigger/app.ts';
import type { JobExecutor } from '../../src/trigger/executor.ts';
import { SECRETS, fixture, get, startTestTrigger, type TestTrigger } from './helpers.ts';
import { fuzzCount, fuzzSeed, type Rng } from '../helpers/fuzz/rng.ts';
import { rawRequest, routeRequest, type RouteTemplate } from '../helpers/fuzz/requests.ts';
import { runFuzz } from '../helpers/fuzz/run-fuzz.ts';
import type { Json } from '../helpers/fuzz/values.ts';

const REQUESTS = fuzzCount(8_000);
/** The server's clock: every fixture's signed timestamp is set to it, so mutated deliveries pass the window check. */
const NOW = Date.parse('2026-02-01T10:00:00.000Z');
const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

/** Runs nothing: a launched job fails at once, so thousands of accepted deliveries cost no child processes. */
const inertExecutor: JobExecutor = {
  source: 'local',
  launch: async () => ({ exitCode: 1, run: null, error: 'the fuzz executor runs nothing' }),
  follow: async () => null,
};

function json(name: string, edit: (v: Record<string, unknown>) => void = () => {}): Json {
  const value = JSON.parse(fixture(name).toString('utf8')) as Record<string, unknown>;
  edit(value);
  return value as Json;
}

function templates(): Map<string, RouteTemplate> {
  const hex = (secret: string) => (body: Buffer) => ({ sig: sign.hex(secret, body) });
  const errtrack = hex(SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET);
  const sha256 = (secret: string, header: string) => (body: Buffer, rng: Rng) => ({
    [header]: `sha256=${sign.hex(secret, body)}`,
    ...(rng.chance(0.5) ? { 'x-vendorb-webhook-identifier': `d-${rng.int(1e9)}`, 'x-github-delivery': `g-${rng.int(1e9)}` } : {}),
  });
  const sourceHost = sha256(SECRETS.GITHUB_WEBHOOK_SECRET, 'x-hub-signature-256');
  const slash = fixture('slack-slash-command.txt').toString().replace('text=', 'text=fix+the+login+bug');
  return new Map<string, RouteTemplate>([
    ['POST /errtrack', {
      bodies: [json('sentry-event-alert-triggered.json'), json('sentry-issue-created.json')],
      sign: (body, rng) => ({
        'errtrack-hook-signature': errtrack(body).sig,
        'errtrack-hook-resource': rng.pick(['event_alert', 'issue', 'installation', '', 'toString']),
      }),
    }],
    ['POST /chata', {
      bodies: [{ form: slash }, json('slack-events-url-verification.json')],
      contentType: 'application/x-www-form-urlencoded',
      sign: (body) => ({
        'content-type': body[0] === 0x7b ? 'application/json' : 'application/x-www-form-urlencoded',
        'x-chata-request-timestamp': String(NOW / 1000),
        'x-chata-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, body, NOW / 1000),
      }),
    }],
    ['POST /trackera', {
      bodies: [json('linear-issue-update.json', (v) => (v.webhookTimestamp = NOW)), json('linear-comment-create.json', (v) => (v.webhookTimestamp = NOW))],
      sign: (body) => ({ 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, body) }),
    }],
    ['POST /trackerb', {
      bodies: [json('jira-issue-created.json'), json('jira-issue-updated-assignee.json'), json('jira-comment-created.json')],
      sign: sha256(SECRETS.TRACKERB_WEBHOOK_SECRET, 'x-hub-signature'),
    }],
    ['POST /chatb', {
      bodies: [json('teams-outgoing-webhook-message-mention.json', (v) => (v.timestamp = new Date(NOW).toISOString()))],
      sign: (body) => ({ authorization: sign.chatb(SECRETS.CHATB_SECURITY_TOKEN, body) }),
    }],
    ['POST /webhook', {
      bodies: [
        { action: 'labeled', label: { name: 'svc' }, issue: { number: 7, title: 'Login fails', body: 'Steps…', author_association: 'OWNER', labels: [{ name: 'svc' }] }, repository: { full_name: 'acme/api' } },
        { action: 'created', comment: { body: '/svc fix it', author_association: 'MEMBER' }, issue: { number: 8, title: 'Crash' }, repository: { full_name: 'acme/api' } },
      ],
      sign: (body, rng) => ({ ...sourceHost(body, rng), 'x-github-event': rng.pick(['issues', 'issue_comment', 'push', '', '__proto__']) }),
    }],
    ['POST /jobs', { bodies: [{ brief: 'fix the flaky login test', pr: true, request_id: 'req-1' }], sign: () => bearer }],
    ['GET /jobs/:id', { params: { id: ['j01jd0000000000000000000000', 'j00000000000000000000000000'] }, auth: bearer }],
  ]);
}

function inboxFingerprint(repo: string): string {
  const dir = join(repo, '.svc', 'inbox', 'trackera');
  let names: string[] = [];
  try {
    names = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((n) => n.endsWith('.json')).sort();
  } catch {
    return 'none';
  }
  const hash = createHash('sha256');
  for (const name of names) hash.update(name).update(readFileSync(join(dir, name)));
  return `${names.length}:${hash.digest('hex').slice(0, 12)}`;
}

describe('fuzzing every trigger route with signed real payloads', () => {
  let t: TestTrigger;
  const seed = fuzzSeed();
  const routeTemplates = templates();
  before(async () => {
    t = await startTestTrigger(
      { TRACKERB_ASSIGNEES: '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4', CHATA_HOOKS_PREFIX: 'https://hooks.slack.com/' },
      { executor: inertExecutor, clock: () => NOW, post: async () => ({ status: 200, text: '{}' }) },
    );
  });
  after(() => t.cleanup());

  function fingerprint(): string {
    const row = t.stores.db
      .prepare('SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM dedupe_keys) AS keys, (SELECT count(*) FROM jobs WHERE reply_channel IS NOT NULL) AS replies')
      .get() as Record<string, unknown>;
    return `${Object.values(row).join(' ')} inbox ${inboxFingerprint(t.repo)}`;
  }

  function generate(rng: Rng) {
    const route = rng.pick(triggerRoutes);
    if (rng.chance(0.05)) return rawRequest(rng, route, new URL(t.url).host);
    return routeRequest(rng, route, routeTemplates.get(`${route.method} ${route.pattern}`) ?? {});
  }

  it(`sends ${REQUESTS} generated requests: no 5xx, every error the envelope, nothing queued when refused`, async (tc) => {
    const report = await runFuzz({ baseUrl: t.url, seed, total: REQUESTS, concurrency: 16, generate, fingerprint });
    tc.diagnostic(`seed ${seed}: ${report.sent} requests, statuses ${JSON.stringify(report.statuses)}`);
    if (process.env.SVC_FUZZ_VERBOSE) tc.diagnostic(JSON.stringify(report.byRoute, null, 1));
    assert.deepEqual(report.problems, [], `fuzz seed ${seed} (replay: SVC_FUZZ_SEED=${seed}); statuses ${JSON.stringify(report.statuses)}`);
    assert.equal(report.sent, REQUESTS);
    // Signed mutations reach the handlers: some deliveries were queued, many refused by the readers themselves.
    assert.ok((report.statuses['202'] ?? 0) > 0 && (report.statuses['400'] ?? 0) > 0, JSON.stringify(report.statuses));
  });

  it('is still alive and serving afterwards', async () => {
    assert.equal((await get(`${t.url}/health`)).status, 200);
    assert.equal((await get(`${t.url}/status`)).status, 200);
  });
});
