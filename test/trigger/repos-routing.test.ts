// One trigger server for three repositories: every source's signed delivery reaches the right repository's
// checkout, an event for a repository that is not served is skipped with its reason, and nothing is guessed.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { basename, join } from 'node:path';
import { sign } from './helpers.ts';
import {
  SECRETS, chataFormHeaders, fixture, withJson, post, get, rowCount, startTestTrigger, makeRepo, tempDir,
  type TestTrigger,
} from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { makeCert, startStandIn, type StandIn } from './standins.ts';
import { createGithubApi } from '../../src/trigger/github-api.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
const GITHUB = new URL('./fixtures/github/', import.meta.url);
const TEAMS_CHANNEL = '19:253b1f341670408fb6fe51050b6e5ceb@thread.skype';
const SLACK_CHANNEL = 'G8PSS9T3V';
const ASSIGNEE = '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4';

function errtrack(raw: Buffer, resource: string): Record<string, string> {
  const signature = sign.hex(SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET, raw);
  return { 'errtrack-hook-signature': signature, 'errtrack-hook-resource': resource };
}

function trackerb(raw: Buffer): Record<string, string> {
  return { 'x-hub-signature': `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}` };
}

/** GitHub's own payload (octokit/webhooks examples), edited, re-serialised and signed. */
interface Signed {
  raw: Buffer;
  headers: Record<string, string>;
}

function github(name: string, edit: (v: Record<string, any>) => void): Signed {
  const value = JSON.parse(readFileSync(new URL(name, GITHUB), 'utf8')) as Record<string, any>;
  edit(value);
  const raw = Buffer.from(JSON.stringify(value));
  const event = name.startsWith('issue_comment') ? 'issue_comment' : 'issues';
  const headers = {
    'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`,
    'x-github-event': event,
    'x-github-delivery': `d-${Math.random()}`,
  };
  return { raw, headers };
}

let issueIds = 0;

/** An issue of its own (GitHub's issue ids are global) labelled svc in `fullName`. */
function labeled(fullName: string, title: string) {
  return github('issues-labeled.with-organization.json', (v) => {
    v.issue.id = 5_000_000 + ++issueIds;
    v.label.name = 'svc';
    v.issue.title = title;
    v.repository.full_name = fullName;
  });
}

function slash(text: string, channel = SLACK_CHANNEL): Signed {
  const body = fixture('slack-slash-command.txt').toString()
    .replace('text=', `text=${encodeURIComponent(text)}`)
    .replace(`channel_id=${SLACK_CHANNEL}`, `channel_id=${channel}`);
  const raw = Buffer.from(body);
  return { raw, headers: chataFormHeaders(raw) };
}

async function finished(t: TestTrigger, id: string): Promise<Record<string, unknown>> {
  return waitFor(async () => {
    const job = (await get(`${t.url}/jobs/${id}`, bearer)).body;
    return job.status !== 'queued' && job.status !== 'running' ? job : null;
  }, `job ${id} to finish`);
}

function runsIn(dir: string): string[] {
  const runs = join(dir, '.svc', 'runs');
  return existsSync(runs) ? readdirSync(runs) : [];
}

describe('one trigger server for an organisation with three repositories', () => {
  let t: TestTrigger;
  let api: string;
  let web: string;
  let ops: string;
  let file: string;
  let githubApi: StandIn;
  const jobsByRepo = new Map<string, string[]>();

  before(async () => {
    api = makeRepo('Codertocat/Hello-World');
    web = makeRepo('Octocoders/Hello-World');
    ops = makeRepo('acme/ops');
    file = join(tempDir('svc-repos-file-'), 'repos.conf');
    writeFileSync(file, [
      '# three repositories, no default: an event nobody mapped is refused',
      `Codertocat/Hello-World checkout=${api} errtrack=front-end trackera=LIN chata=${SLACK_CHANNEL}`,
      `Octocoders/Hello-World checkout=${web} trackerb=KAN chatb=${TEAMS_CHANNEL} chata=C0WEB`,
      '# every chata channel may start work here, by naming it with repo=',
      `acme/ops checkout=${ops} chata=*`,
      '',
    ].join('\n'));
    // GitHub's API: every commenter asked about may write, but `reader` (an organization member who may only read).
    const cert = makeCert(tempDir('svc-cert-'));
    githubApi = await startStandIn(cert);
    githubApi.respond = (req) => ({ status: 200, body: JSON.stringify({
      permission: req.path.endsWith('/collaborators/reader/permission') ? 'read' : 'write' }) });
    t = await startTestTrigger({ TRACKERB_ASSIGNEES: ASSIGNEE }, {
      repo: api, reposFile: file, github: createGithubApi({ apiUrl: githubApi.url, token: 'gh-token' }, cert.cert),
    });
  });
  after(async () => {
    await t.cleanup();
    await githubApi.close();
    for (const dir of [api, web, ops]) rmSync(dir, { recursive: true, force: true });
  });

  /** The job ran in `dir` only: its repo field, the launcher's cwd, and its run folder there. */
  async function ranIn(id: string, repo: string, dir: string): Promise<Record<string, unknown>> {
    const job = await finished(t, id);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.repo, repo);
    const call = t.calls().find((c) => c.env.SVC_JOB_ID === id)!;
    assert.equal(call.cwd, dir);
    const run = (job.run as { run: string }).run;
    assert.ok(runsIn(dir).includes(run), `run ${run} in ${dir}`);
    jobsByRepo.set(dir, [...(jobsByRepo.get(dir) ?? []), run]);
    return job;
  }

  describe('POST /webhook with GitHub payloads from two repositories', () => {
    it('runs an issue labelled svc in Codertocat/Hello-World in that repository\'s checkout', async () => {
      const { raw, headers } = labeled('Codertocat/Hello-World', 'Spelling error in the README file');
      const res = await post(`${t.url}/webhook`, raw, headers);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const job = await ranIn(res.body.job_id as string, 'Codertocat/Hello-World', api);
      assert.match(job.brief as string, /^Codertocat\/Hello-World#1 Spelling error/);
    });
    it('runs a /svc comment in Octocoders/Hello-World in the other checkout', async () => {
      const { raw, headers } = github('issue_comment-created.with-organization.json', (v) => {
        v.comment.body = '/svc fix the typo';
        v.repository.full_name = 'Octocoders/Hello-World';
      });
      const res = await post(`${t.url}/webhook`, raw, headers);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const job = await ranIn(res.body.job_id as string, 'Octocoders/Hello-World', web);
      assert.match(job.brief as string, /fix the typo$/);
    });
    it('skips a /svc comment from a MEMBER who may only read the repository, asked of GitHub\'s API', async () => {
      const jobRows = rowCount(t.stores.db, 'jobs');
      const { raw, headers } = github('issue_comment-created.with-organization.json', (v) => {
        v.comment.body = '/svc push this';
        v.comment.author_association = 'MEMBER';
        v.comment.user.login = 'reader';
        v.repository.full_name = 'Octocoders/Hello-World';
      });
      const res = await post(`${t.url}/webhook`, raw, headers);
      assert.deepEqual(res.body, {
        status: 'skipped', reason: 'comment author may not start jobs: the author may not write to this repository',
      });
      const asked = '/repos/Octocoders/Hello-World/collaborators/reader/permission';
      assert.ok(githubApi.requests.some((r) => r.path === asked));
      assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
    });
    it('asks GitHub about an Enterprise Managed User, whose login has an underscore, and queues the job', async () => {
      const { raw, headers } = github('issue_comment-created.with-organization.json', (v) => {
        v.comment.body = '/svc fix the EMU typo';
        v.comment.author_association = 'MEMBER';
        v.comment.user.login = 'octocat_acme';
        v.repository.full_name = 'Octocoders/Hello-World';
      });
      const res = await post(`${t.url}/webhook`, raw, headers);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const asked = '/repos/Octocoders/Hello-World/collaborators/octocat_acme/permission';
      assert.ok(githubApi.requests.some((r) => r.path === asked));
      await ranIn(res.body.job_id as string, 'Octocoders/Hello-World', web);
    });
    it('matches repository.full_name without regard to case, as GitHub does', async () => {
      const { raw, headers } = labeled('codertocat/hello-world', 'Case');
      const res = await post(`${t.url}/webhook`, raw, headers);
      assert.equal(res.status, 202);
      await ranIn(res.body.job_id as string, 'Codertocat/Hello-World', api);
    });
    it('skips an event of a repository that is not served with 200 and a reason, counts it, and queues nothing',
      async () => {
        const before = (await get(`${t.url}/status`)).body.repos as { skipped_unserved: Record<string, number> };
        const jobRows = rowCount(t.stores.db, 'jobs');
        const { raw, headers } = labeled('acme/secret-project', 'Delete the database');
        const res = await post(`${t.url}/webhook`, raw, headers);
        assert.equal(res.status, 200);
        assert.deepEqual(res.body, { status: 'skipped', reason: 'repository "acme/secret-project" is not served' });
        assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
        type Repos = { served: number; skipped_unserved: Record<string, number> };
        const after = (await get(`${t.url}/status`)).body.repos as Repos;
        assert.equal(after.served, 3);
        assert.equal(after.skipped_unserved.webhook, (before.skipped_unserved.webhook ?? 0) + 1);
        assert.ok(t.logs.some((l) => l.msg === 'delivery skipped: repository not served' && l.route === 'webhook'));
        // Skipped deliveries claim no dedupe key: the same delivery is skipped again, never "duplicate".
        assert.equal((await post(`${t.url}/webhook`, raw, headers)).body.status, 'skipped');
      });
  });

  describe('sources whose events name no repository, by the keys the file maps', () => {
    it('routes an errtrack issue by its project slug and builds the brief from that checkout', async () => {
      const raw = fixture('sentry-issue-created.json');
      const res = await post(`${t.url}/errtrack`, raw, errtrack(raw, 'issue'));
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const job = await ranIn(res.body.job_id as string, 'Codertocat/Hello-World', api);
      assert.ok((job.brief as string).includes('last deploy abcdef1'));
    });
    it('routes an errtrack event alert by the slug in its event URL', async () => {
      const raw = fixture('sentry-event-alert-triggered.json');
      const res = await post(`${t.url}/errtrack`, raw, errtrack(raw, 'event_alert'));
      assert.equal(res.status, 202);
      await ranIn(res.body.job_id as string, 'Codertocat/Hello-World', api);
    });
    it('routes a trackera issue by its team key and keeps the snapshot in that checkout only', async () => {
      const raw = withJson('linear-issue-update.json', (v) => (v.webhookTimestamp = Date.now()));
      const headers = { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) };
      const res = await post(`${t.url}/trackera`, raw, headers);
      assert.equal(res.status, 202);
      await ranIn(res.body.job_id as string, 'Codertocat/Hello-World', api);
      assert.deepEqual(readFileSync(join(api, '.svc', 'inbox', 'trackera', 'LIN-34.json')), raw);
      assert.equal(existsSync(join(web, '.svc', 'inbox')), false);
    });
    it('routes a trackerb issue by its project key', async () => {
      const raw = fixture('jira-issue-created.json');
      const res = await post(`${t.url}/trackerb`, raw, trackerb(raw));
      assert.equal(res.status, 202);
      await ranIn(res.body.job_id as string, 'Octocoders/Hello-World', web);
    });
    it('skips a trackerb project nobody mapped when no repository is the default', async () => {
      const raw = withJson('jira-issue-created.json', (v) => {
        const issue = v.issue as { key: string; fields: { project: { key: string } } };
        issue.key = 'ZZZ-9';
        issue.fields.project.key = 'ZZZ';
      });
      const res = await post(`${t.url}/trackerb`, raw, trackerb(raw));
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'skipped');
      assert.match(res.body.reason as string, /trackerb key "ZZZ" is not served and no repository is the default/);
    });
    it('routes a chatb message by its channel', async () => {
      const now = new Date().toISOString();
      const raw = withJson('teams-outgoing-webhook-message-mention.json', (v) => (v.timestamp = now));
      const res = await post(`${t.url}/chatb`, raw, { authorization: sign.chatb(SECRETS.CHATB_SECURITY_TOKEN, raw) });
      const id = /(j\w{26})$/.exec(res.body.text as string)![1]!;
      await ranIn(id, 'Octocoders/Hello-World', web);
    });
  });

  describe('POST /chata: a channel reaches only the repositories mapped to it; repo= picks among those', () => {
    it('routes a slash command by its channel', async () => {
      const { raw, headers } = slash('fix the login bug');
      const res = await post(`${t.url}/chata`, raw, headers);
      const id = /Queued job (j\w{26})/.exec(res.body.text as string)![1]!;
      const job = await ranIn(id, 'Codertocat/Hello-World', api);
      assert.deepEqual(job.args, ['start', 'fix the login bug', '--detach']);
    });
    it('takes repo= of an entry open to every channel (chata=*) out of the text and runs there', async () => {
      const { raw, headers } = slash('repo=acme/ops --tidy the runbook');
      const res = await post(`${t.url}/chata`, raw, headers);
      const id = /Queued job (j\w{26})/.exec(res.body.text as string)![1]!;
      const job = await ranIn(id, 'acme/ops', ops);
      assert.deepEqual(job.args, ['start', 'tidy the runbook', '--detach']);
    });
    it('refuses repo= of a served repository another channel owns, naming only what this channel may reach',
      async () => {
        const jobRows = rowCount(t.stores.db, 'jobs');
        const { raw, headers } = slash('repo=Octocoders/Hello-World add a debug endpoint');
        const res = await post(`${t.url}/chata`, raw, headers);
        assert.equal(res.status, 200);
        assert.equal(res.body.status, 'skipped');
        assert.equal(res.body.text, `Not queued: chata channel "${SLACK_CHANNEL}" may not start work in `
          + '"octocoders/hello-world" (it may start work in Codertocat/Hello-World, acme/ops).');
        assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
      });
    it('refuses repo= from a channel nobody mapped, and lists only the entries open to every channel', async () => {
      const jobRows = rowCount(t.stores.db, 'jobs');
      const { raw, headers } = slash('repo=Codertocat/Hello-World add a debug endpoint', 'C0OTHER');
      const res = await post(`${t.url}/chata`, raw, headers);
      assert.equal(res.body.status, 'skipped');
      const reach = /may not start work in "codertocat\/hello-world" \(it may start work in acme\/ops\)\.$/;
      assert.match(res.body.text as string, reach);
      assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
    });
    it('answers an unknown repo= exactly as one it may not reach: the served list is never shown', async () => {
      const { raw, headers } = slash('repo=acme/nope fix it', 'C0WEB');
      const res = await post(`${t.url}/chata`, raw, headers);
      assert.equal(res.body.status, 'skipped');
      assert.equal(res.body.text, 'Not queued: chata channel "C0WEB" may not start work in "acme/nope" '
        + '(it may start work in Octocoders/Hello-World, acme/ops).');
      assert.doesNotMatch(res.body.text as string, /Codertocat/);
    });
    it('skips a channel nobody mapped when no repository is the default', async () => {
      const { raw, headers } = slash('fix it', 'C0OTHER');
      const res = await post(`${t.url}/chata`, raw, headers);
      assert.equal(res.body.status, 'skipped');
      assert.match(res.body.reason as string, /chata channel "C0OTHER" is mapped to no repository: add repo=/);
    });
  });

  describe('POST /chatb: the same rule', () => {
    it('refuses repo= naming a repository the Teams channel is not mapped to; nothing queued', async () => {
      const jobRows = rowCount(t.stores.db, 'jobs');
      const now = new Date().toISOString();
      const raw = withJson('teams-outgoing-webhook-message-mention.json', (v) => {
        v.timestamp = now;
        v.text = '<at>svc</at> repo=acme/ops add a debug endpoint';
      });
      const res = await post(`${t.url}/chatb`, raw, { authorization: sign.chatb(SECRETS.CHATB_SECURITY_TOKEN, raw) });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'skipped');
      assert.equal(res.body.text, `Not queued: chatb channel "${TEAMS_CHANNEL}" may not start work in "acme/ops" `
        + '(it may start work in Octocoders/Hello-World).');
      assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
    });
  });

  describe('POST /jobs with "repo"', () => {
    it('runs in the named repository', async () => {
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'rotate the logs', repo: 'acme/ops' }), bearer);
      assert.equal(res.status, 202);
      await ranIn(res.body.job_id as string, 'acme/ops', ops);
    });
    it('answers 400 invalid_param for a repository that is not served, and for none without a default', async () => {
      const unknown = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'x', repo: 'acme/nope' }), bearer);
      assert.equal(unknown.status, 400);
      assert.equal((unknown.body.error as { code: string }).code, 'invalid_param');
      const none = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'x' }), bearer);
      assert.equal(none.status, 400);
      assert.match((none.body.error as { message: string }).message, /"repo" is required/);
      const bad = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'x', repo: ['acme/ops'] }), bearer);
      assert.equal(bad.status, 400);
    });
  });

  it('never touched one repository\'s checkout with another\'s job', () => {
    for (const dir of [api, web, ops]) {
      assert.deepEqual(runsIn(dir).sort(), (jobsByRepo.get(dir) ?? []).sort(), dir);
    }
  });
});

describe('a default repository', () => {
  let t: TestTrigger;
  let api: string;
  let web: string;
  before(async () => {
    api = makeRepo('acme/api');
    web = makeRepo('acme/web');
    const file = join(tempDir('svc-repos-file-'), 'repos.conf');
    writeFileSync(file, [
      `acme/api checkout=${api} trackerb=API chata=C0BOTH`, `acme/web checkout=${web} default chata=C0BOTH`, '',
    ].join('\n'));
    t = await startTestTrigger({ TRACKERB_LABELS: '', TRACKERB_ASSIGNEES: ASSIGNEE }, { repo: api, reposFile: file });
  });
  after(async () => {
    await t.cleanup();
    for (const dir of [api, web]) rmSync(dir, { recursive: true, force: true });
  });

  it('takes the events of keys nobody mapped and /jobs without "repo"', async () => {
    const raw = fixture('jira-issue-created.json');
    const res = await post(`${t.url}/trackerb`, raw, trackerb(raw));
    assert.equal(res.status, 202);
    assert.equal((await finished(t, res.body.job_id as string)).repo, 'acme/web');
    const jobs = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'tidy' }), bearer);
    assert.equal((await finished(t, jobs.body.job_id as string)).repo, 'acme/web');
  });
  it('asks a channel mapped to two repositories to pick one with repo=, and runs where it picked', async () => {
    const both = slash('tidy the logs', 'C0BOTH');
    const refused = await post(`${t.url}/chata`, both.raw, both.headers);
    assert.equal(refused.body.text, 'Not queued: chata channel "C0BOTH" reaches several repositories: add '
      + 'repo=owner/name (it may start work in acme/api, acme/web).');
    const picked = slash('repo=acme/web tidy the logs', 'C0BOTH');
    const res = await post(`${t.url}/chata`, picked.raw, picked.headers);
    const id = /Queued job (j\w{26})/.exec(res.body.text as string)![1]!;
    assert.equal((await finished(t, id)).repo, 'acme/web');
  });
  it('never takes a chat message from a channel mapped to nothing: default routes, it does not grant', async () => {
    const jobRows = rowCount(t.stores.db, 'jobs');
    const { raw, headers } = slash('add a debug endpoint', 'C0ANYONE');
    const res = await post(`${t.url}/chata`, raw, headers);
    assert.equal(res.body.status, 'skipped');
    assert.equal(res.body.text, 'Not queued: chata channel "C0ANYONE" is mapped to no repository '
      + '(it may start work in no repository here).');
    const named = slash('repo=acme/web add a debug endpoint', 'C0ANYONE');
    assert.equal((await post(`${t.url}/chata`, named.raw, named.headers)).body.status, 'skipped');
    assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
  });
  it('never takes a GitHub event of another repository', async () => {
    const { raw, headers } = labeled('acme/other', 'x');
    const res = await post(`${t.url}/webhook`, raw, headers);
    assert.deepEqual(res.body, { status: 'skipped', reason: 'repository "acme/other" is not served' });
  });
});

describe('the --repo shorthand', () => {
  let t: TestTrigger;
  before(async () => {
    t = await startTestTrigger();
  });
  after(() => t.cleanup());

  it('serves its checkout under the owner/name of its origin and skips GitHub events of any other', async () => {
    const ours = labeled('acme/api', 'ours');
    const res = await post(`${t.url}/webhook`, ours.raw, ours.headers);
    assert.equal(res.status, 202);
    assert.equal((await finished(t, res.body.job_id as string)).repo, 'acme/api');
    const theirs = labeled('acme/web', 'theirs');
    const skipped = await post(`${t.url}/webhook`, theirs.raw, theirs.headers);
    assert.equal(skipped.body.status, 'skipped');
  });
});

describe('the --repo shorthand of a checkout with no origin', () => {
  let t: TestTrigger;
  const plain = tempDir('svc-plain-');
  before(async () => {
    execFileSync('git', ['init', '-q', plain]);
    t = await startTestTrigger({}, { repo: plain });
  });
  after(async () => {
    await t.cleanup();
    rmSync(plain, { recursive: true, force: true });
  });

  it('takes POST /jobs "repo" as local/<folder> or as the folder alone, the name svc start gives its runs', async () => {
    const folder = basename(plain);
    for (const repo of [`local/${folder}`, folder]) {
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: `tidy up for ${repo}`, repo }), bearer);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      assert.equal((await finished(t, res.body.job_id as string)).repo, `local/${folder}`);
    }
  });

  it('names the served repositories when "repo" names none of them', async () => {
    const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'x', repo: 'acme/nope' }), bearer);
    assert.equal(res.status, 400);
    assert.equal((res.body.error as { message: string }).message,
      `"repo" names a repository that is not served: "acme/nope" (served: local/${basename(plain)})`);
  });
});
