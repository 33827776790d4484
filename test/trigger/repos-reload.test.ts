// The served repositories file while the server runs: `svc repos add/remove` take effect at the next delivery (no
// restart), a broken edit never replaces the table in use, a file that another source overrides is named in a warning
// with what overrides it, `svc repos` run as root keeps the service's file the service's, and GET /ready says whether
// the server can take work.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chownSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sign } from './helpers.ts';
import { resolveTriggerSettings } from '../../src/trigger/settings.ts';
import { SECRETS, fixture, get, post, makeRepo, startTestTrigger, tempDir, type TestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { startStandIn, type StandIn } from './standins.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const ASSIGNEE = '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4';

function svc(args: string[], home: string) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: home } });
}

/** A Jira issue of project KAN, signed; every call a new delivery. */
function jiraIssue(n: number): { raw: Buffer; headers: Record<string, string> } {
  const value = JSON.parse(fixture('jira-issue-created.json').toString('utf8')) as { issue: { fields: { summary: string } } };
  value.issue.fields.summary = `reload ${n}`;
  const raw = Buffer.from(JSON.stringify(value));
  return { raw, headers: { 'x-hub-signature': `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}` } };
}

describe('svc repos add and remove on a running server', () => {
  let t: TestTrigger;
  let api: string;
  let web: string;
  let home: string;
  let file: string;
  let n = 0;
  // A stand-in for the Control Plane's /v1/ingest: what it was told the server serves, in order.
  let control: StandIn;
  const reported = (): string[][] => control.requests.flatMap((r) => {
    const body = JSON.parse(r.body) as { served_repos?: Array<{ name: string }> };
    return body.served_repos ? [body.served_repos.map((repo) => repo.name)] : [];
  });
  before(async () => {
    control = await startStandIn(null);
    api = makeRepo('acme/api');
    web = makeRepo('acme/web');
    home = tempDir('svc-reload-home-');
    file = join(home, 'repos.conf');
    writeFileSync(file, `acme/api checkout=${api} trackerb=API\n`);
    const env = { TRACKERB_ASSIGNEES: ASSIGNEE, SVC_CONTROL_URL: control.url };
    t = await startTestTrigger(env, { repo: api, reposFile: file });
  });
  after(async () => {
    await t.cleanup();
    await control.close();
  });

  async function deliver(): Promise<Record<string, unknown>> {
    const { raw, headers } = jiraIssue(++n);
    return (await post(`${t.url}/trackerb`, raw, headers)).body;
  }

  it('routes to a repository added after the start, from the next delivery on, and stops once it is removed', async () => {
    assert.equal((await deliver()).status, 'skipped');
    const added = svc(['repos', 'add', 'acme/web', `checkout=${web}`, 'trackerb=KAN', '--file', file], home);
    assert.equal(added.status, 0, added.stderr);
    const queued = await deliver();
    assert.equal(queued.status, 'queued', JSON.stringify(queued));
    const job = (await get(`${t.url}/jobs/${queued.job_id as string}`, { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` }));
    assert.equal(job.body.repo, 'acme/web');
    assert.ok(t.logs.some((l) => l.msg === 'served repositories reloaded'));
    await waitFor(() => reported().some((names) => names.includes('acme/web')), 'the new table reported');
    assert.deepEqual(reported()[0], ['acme/api']);
    const removed = svc(['repos', 'remove', 'acme/web', '--file', file], home);
    assert.equal(removed.status, 0, removed.stderr);
    assert.equal((await deliver()).status, 'skipped');
  });

  it('keeps the table in use when a hand edit breaks the file, and logs why', async () => {
    writeFileSync(file, `acme/api checkout=${api} trackerb=API,KAN\n`);
    assert.equal((await deliver()).status, 'queued');
    writeFileSync(file, `acme/api checkout=${api} trackerb=API,KAN\nnot a line\n`);
    assert.equal((await deliver()).status, 'queued');
    const error = t.logs.find((l) => l.msg === 'served repositories file changed but is not used; the previous table stays');
    assert.match(String(error?.error), /repos\.conf:2: "not" is not a repository owner\/name/);
  });
});

describe('which repositories source wins, said out loud', () => {
  it('names an existing repositories file that SVC_TRIGGER_REPO or --repo overrides, and logs the real source', () => {
    const home = tempDir('svc-override-home-');
    const repo = makeRepo('acme/api');
    const file = join(home, '.svc', 'trigger', 'repos.conf');
    mkdirSync(join(home, '.svc', 'trigger'), { recursive: true });
    writeFileSync(file, `acme/api checkout=${repo} default\n`);
    const env = { HOME: home, SVC_TRIGGER_REPO: repo };
    const byEnv = resolveTriggerSettings(env, {}, home);
    assert.equal(byEnv.repos.source, `SVC_TRIGGER_REPO=${repo}`);
    assert.ok(byEnv.problems.warnings.includes(
      `The served repositories file ${file} exists but is not read: SVC_TRIGGER_REPO=${repo} overrides it`));
    // /webhook without a GitHub token: said once at start, with what stops working.
    const noToken = (w: string) => w.startsWith('Neither GITHUB_TOKEN nor GH_TOKEN is set: /webhook skips every /svc');
    assert.ok(resolveTriggerSettings({ ...env, GITHUB_WEBHOOK_SECRET: 's' }, {}, home).problems.warnings.some(noToken));
    for (const quiet of [{ ...env, GITHUB_WEBHOOK_SECRET: 's', GH_TOKEN: 't' }, env]) {
      assert.ok(!resolveTriggerSettings(quiet, {}, home).problems.warnings.some(noToken));
    }
    const byFlag = resolveTriggerSettings({ HOME: home, SVC_TRIGGER_REPOS: file }, { repo }, home);
    assert.equal(byFlag.repos.source, `--repo ${repo}`);
    assert.ok(byFlag.problems.warnings.includes(
      `The served repositories file ${file} exists but is not read: --repo ${repo} overrides it`));
    const byFile = resolveTriggerSettings({ HOME: home }, {}, home);
    assert.equal(byFile.repos.source, file);
    assert.deepEqual(byFile.problems.warnings.filter((w) => w.includes('repositories file')), []);
  });
});

describe('svc repos as root', () => {
  it('leaves the service\'s file owned by the service, so a root edit never locks the server out', (t) => {
    if (process.getuid?.() !== 0) return t.skip('needs root');
    const state = tempDir('svc-root-edit-');
    const repo = makeRepo('acme/api');
    const nobody = 65534;
    chownSync(state, nobody, nobody);
    const file = join(state, 'repos.conf');
    const added = svc(['repos', 'add', 'acme/api', `checkout=${repo}`, 'default', '--file', file], state);
    assert.equal(added.status, 0, added.stderr);
    assert.deepEqual([statSync(file).uid, statSync(file).gid, statSync(file).mode & 0o777], [nobody, nobody, 0o600]);
    const again = svc(['repos', 'add', 'acme/web', `checkout=${makeRepo('acme/web')}`, '--file', file], state);
    assert.equal(again.status, 0, again.stderr);
    assert.equal(statSync(file).uid, nobody);
    assert.match(readFileSync(file, 'utf8'), /^acme\/web /m);
  });
});

describe('GET /ready', () => {
  it('answers 200 while the server can take work and 503 unavailable once its database cannot answer', async () => {
    const t = await startTestTrigger();
    try {
      const ready = await get(`${t.url}/ready`);
      assert.equal(ready.status, 200);
      assert.deepEqual(ready.body, { status: 'ok' });
      t.stores.db.close();
      const down = await get(`${t.url}/ready`);
      assert.equal(down.status, 503);
      assert.equal((down.body.error as { code: string }).code, 'unavailable');
    } finally {
      await t.cleanup().catch(() => {});
    }
  });
});
