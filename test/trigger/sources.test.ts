import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { symlinkSync, writeFileSync, rmSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { briefOf, sanitizeBrief, sourceOf } from '../../src/webhook-sources.ts';
import { capUtf8 } from '../../src/one-line.ts';
import { flattenAdf, readTrackerb } from '../../src/trigger/sources/trackerb.ts';
import { chatbText } from '../../src/trigger/sources/chatb.ts';
import { readTrackera, stageTrackeraSnapshot } from '../../src/trigger/sources/trackera.ts';
import { readErrtrackAlert, buildErrtrackBrief, resolveInsideRepo } from '../../src/trigger/sources/errtrack.ts';
import { readWebhook } from '../../src/trigger/sources/webhook.ts';
import { resolveRouteSecrets } from '../../src/trigger/settings.ts';
import { fixture, makeRepo, tempDir } from './helpers.ts';

function json(name: string): Record<string, unknown> {
  return JSON.parse(fixture(name).toString('utf8')) as Record<string, unknown>;
}

describe('sanitizeBrief', () => {
  it('folds to one line, removes control and bidi characters and never starts with a hyphen', () => {
    assert.equal(sanitizeBrief('--rm -rf\n\tnow\u0000 \u202eevil'), 'rm -rf now evil');
    assert.equal(sanitizeBrief(' \u2014 em dash lead'), 'em dash lead');
  });
  it('caps on a UTF-8 character boundary', () => {
    const capped = capUtf8('ab€€', 6);
    assert.equal(capped, 'ab€');
    assert.ok(Buffer.byteLength(capUtf8('😀'.repeat(600), 1500)) <= 1500);
    assert.equal(capUtf8('😀😀', 5), '😀');
  });
  it('cuts where adding up each character\'s UTF-8 size would, lone surrogates and pairs included', () => {
    const byCharacter = (text: string, max: number): string => {
      if (Buffer.byteLength(text) <= max) return text;
      let bytes = 0;
      let end = 0;
      for (const ch of text) {
        const size = Buffer.byteLength(ch);
        if (bytes + size > max) break;
        bytes += size;
        end += ch.length;
      }
      return text.slice(0, end).trimEnd();
    };
    const pieces = ['a', 'é', '€', '😀', ' ', '\ud83d', '\ude00', '\udfff\ud800', '\u3000', 'x '];
    let seed = 11;
    const next = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648);
    for (let round = 0; round < 20_000; round++) {
      let text = '';
      for (let i = next() % 30; i > 0; i--) text += pieces[next() % pieces.length]!;
      const max = next() % 40;
      assert.equal(capUtf8(text, max), byCharacter(text, max), `${JSON.stringify(text)} at ${max}`);
    }
  });
  it('gives a long text the same brief as cleaning all of it, whatever sits where the head is cut', () => {
    // The whole-text result, written out the slow way: fold, strip, cap.
    const whole = (text: string, max: number): string =>
      capUtf8(text.replace(/[\s\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]+/g, ' ')
        .trim().replace(/^[\s\-\u2010-\u2015\u2212]+/u, ''), max);
    const pieces = ['a', 'é', '😀', ' ', '\n', '\t\t', '\u0000', '\u202e', '-', '\u2014', 'word ', '   ', '\ud83d'];
    let seed = 7;
    const next = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648);
    for (let round = 0; round < 300; round++) {
      const max = [40, 100, 1500][round % 3]!;
      let text = round % 5 === 0 ? '-- ' : '';
      // Long enough to take the head path, with runs of one piece so whitespace can pile up at the cut.
      const longest = round % 4 === 0 ? 400 : 3;
      while (text.length < max * 3 + 200) text += pieces[next() % pieces.length]!.repeat(1 + (next() % longest));
      assert.equal(sanitizeBrief(text, max), whole(text, max), `round ${round}`);
    }
    assert.equal(sanitizeBrief(' '.repeat(5000) + 'tail', 100), 'tail');
    assert.equal(Buffer.byteLength(sanitizeBrief('x '.repeat(600_000))), 1499);
  });
  it('folds every UTF-16 code unit as "each run of whitespace and control characters becomes one space" says', () => {
    // oneLine leaves a lone plain space in place instead of replacing it: the result must be the same.
    const folded = (text: string): string =>
      text.replace(/[\s\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]+/g, ' ').trim();
    for (let unit = 0; unit <= 0xffff; unit++) {
      const ch = String.fromCharCode(unit);
      for (const text of [`a${ch}b`, `a ${ch}b`, `a${ch} b`, `a${ch}${ch}b`, `a ${ch}`]) {
        assert.equal(sanitizeBrief(text), folded(text), `U+${unit.toString(16)} in ${JSON.stringify(text)}`);
      }
    }
  });
});

describe('flattenAdf', () => {
  it('flattens the rich ADF fixture to text that keeps every text node', () => {
    const text = flattenAdf(json('jira-adf-rich-document.json'));
    for (const piece of ['H1', 'H2', '1. Some text', 'Blockquote text', 'Implement epic browser']) assert.ok(text.includes(piece), piece);
    assert.ok(!text.includes('"type"'));
  });
  it('passes plain strings through', () => {
    assert.equal(flattenAdf('plain'), 'plain');
  });
});

describe('readTrackerb', () => {
  const byLabel = { assignees: [], labels: ['svc'] };
  const byAssignee = { assignees: ['Sirajudheen MK'], labels: [] };

  it('queues issue_created for a configured assignee display name, with key, summary and description', () => {
    const input = readTrackerb(json('jira-issue-created.json'), byAssignee);
    assert.equal(input.kind, 'job');
    assert.ok(input.kind === 'job' && input.text.startsWith('KAN-22: Add back button to pages — Add back button navigation'));
  });
  it('matches an assignee by account id too, typed in either case', () => {
    for (const id of ['5b912e21fa38ae2c896099ae', '5B912E21FA38AE2C896099AE']) {
      const filter = { assignees: [id], labels: [] };
      assert.equal(readTrackerb(json('jira-issue-updated-assignee.json'), filter).kind, 'job', id);
    }
  });
  it('matches an email configured for a Jira Server/Data Center assignee whose username is that email', () => {
    const body = {
      webhookEvent: 'jira:issue_created',
      issue: { key: 'AB-1', fields: { assignee: { name: 'jdoe@corp.com', emailAddress: 'john.doe@corp.com' } } },
    };
    assert.equal(readTrackerb(body, { assignees: ['JDoe@corp.com'], labels: [] }).kind, 'job');
  });
  it('matches each configured assignee only against the field of its kind, never a chosen display name', () => {
    const filter = { assignees: ['557058:f00d-svc-bot', 'svc-bot@acme.example', 'Release Bot'], labels: [] };
    const assigned = (assignee: Record<string, unknown>) => readTrackerb({
      webhookEvent: 'jira:issue_updated', changelog: { items: [{ field: 'assignee', fieldId: 'assignee' }] },
      issue: { key: 'KAN-7', fields: { summary: 'do it', project: { key: 'KAN' }, assignee } },
    }, filter).kind;
    assert.equal(assigned({ accountId: '557058:f00d-svc-bot', displayName: 'svc bot' }), 'job');
    assert.equal(assigned({ accountId: '712020:m', emailAddress: 'SVC-BOT@acme.example', displayName: 'M' }), 'job');
    assert.equal(assigned({ accountId: '712020:m', displayName: 'release bot' }), 'job');
    // Someone else who named themselves after the bot's account id or email.
    assert.equal(assigned({ accountId: '712020:mallory', displayName: '557058:f00d-svc-bot' }), 'skip');
    assert.equal(assigned({ accountId: '712020:mallory', displayName: 'SVC-BOT@acme.example' }), 'skip');
    assert.equal(assigned({ accountId: 'Release Bot', emailAddress: 'release bot' }), 'skip');
  });
  it('skips an update that touches only the description', () => {
    assert.equal(readTrackerb(json('jira-issue-updated-description.json'), byAssignee).kind, 'skip');
  });
  it('skips everything when neither assignees nor labels are configured', () => {
    const input = readTrackerb(json('jira-issue-created.json'), { assignees: [], labels: [] });
    assert.deepEqual(input, { kind: 'skip', reason: 'neither TRACKERB_ASSIGNEES nor TRACKERB_LABELS is configured' });
  });
  it('skips comment events', () => {
    assert.equal(readTrackerb(json('jira-comment-created.json'), byLabel).kind, 'skip');
  });
  it('queues a labels change in both changelog forms (space-separated toString, empty fromString)', () => {
    for (const fromString of ['', 'old']) {
      const body = json('jira-issue-updated-description.json');
      (body.changelog as { items: unknown[] }).items = [{ field: 'labels', fieldtype: 'jira', from: null, fromString, to: null, toString: `${fromString} svc`.trim() }];
      assert.equal(readTrackerb(body, byLabel).kind, 'job', fromString);
    }
  });
  it('flattens an ADF description and caps the brief at 1500 bytes', () => {
    const body = json('jira-issue-created.json');
    const issue = body.issue as { fields: Record<string, unknown> };
    issue.fields.labels = ['svc'];
    issue.fields.description = { type: 'doc', version: 1, content: [{ type: 'paragraph', content: [{ type: 'text', text: 'ü'.repeat(2000) }] }] };
    const input = readTrackerb(body, byLabel);
    assert.ok(input.kind === 'job');
    const brief = briefOf('trackerb', input.text);
    assert.ok(Buffer.byteLength(brief) <= 1500);
    assert.ok(brief.includes('üü') && !brief.includes('"doc"'));
  });
});

describe('chat text', () => {
  it('chatb removes <at> mentions and every tag', () => {
    assert.equal(chatbText('<at>MyCustomBot</at> Hello <at>Larry Brown</at>'), 'Hello');
    assert.equal(chatbText('<at>Bot</at> fix <b>the</b> login&nbsp;bug &amp; test'), 'fix the login bug & test');
  });
  it('chata strips leading hyphens so text is never an option', () => {
    const chataText = (text: string) => sanitizeBrief(text, sourceOf('chata').briefBytes);
    assert.equal(chataText('--provider=evil fix it'), 'provider=evil fix it');
    assert.equal(chataText(' - -- '), '');
  });
});

describe('readTrackera', () => {
  it('turns the issue update fixture into its identifier', () => {
    assert.deepEqual(readTrackera(json('linear-issue-update.json')), { kind: 'issue', identifier: 'LIN-34', issueId: '7f2cba4d-6244-415c-ac09-63eb071755a8', teamKey: 'LIN' });
  });
  it('skips comment events', () => {
    assert.equal(readTrackera(json('linear-comment-create.json')).kind, 'skip');
  });
});

describe('errtrack brief', () => {
  const repo = makeRepo();
  const outside = tempDir('svc-outside-');
  after(() => {
    rmSync(repo, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  it('has the title, release, environment, newest deploy record and the culprit file author', async () => {
    const payload = json('sentry-event-alert-triggered.json');
    const event = (payload.data as { event: Record<string, unknown> }).event;
    event.release = 'api@1.2.3';
    event.environment = 'production';
    const frames = ((event.exception as { values: Array<{ stacktrace: { frames: Array<Record<string, unknown>> } }> }).values[0]!.stacktrace.frames);
    frames.push({ filename: 'src/app.js', in_app: true });
    const alert = readErrtrackAlert('event_alert', payload);
    assert.ok(!('skip' in alert));
    const brief = briefOf('errtrack', await buildErrtrackBrief(alert, repo));
    assert.match(brief, /^Fix errtrack issue 1117540176: ReferenceError: heck is not defined/);
    assert.ok(brief.includes('release api@1.2.3'));
    assert.ok(brief.includes('environment production'));
    assert.ok(brief.includes('last deploy abcdef1 2026-01-02T03:04:05.000Z health=ok'));
    assert.ok(brief.includes('last commit to src/app.js by Ada Lovelace'));
    assert.ok(!brief.includes('\n'));
  });
  it('never resolves a culprit outside the project, through .. or a symlink', async () => {
    writeFileSync(join(outside, 'secret.txt'), 'x');
    symlinkSync(join(outside, 'secret.txt'), join(repo, 'link.txt'));
    assert.equal(await resolveInsideRepo(repo, '../' + outside.split('/').pop() + '/secret.txt'), null);
    assert.equal(await resolveInsideRepo(repo, join(outside, 'secret.txt')), null);
    assert.equal(await resolveInsideRepo(repo, 'link.txt'), null);
    assert.equal(await resolveInsideRepo(repo, '/src/app.js'), 'src/app.js');
    assert.equal(await resolveInsideRepo(repo, '.git/config'), null);
  });
  it('routes an alert by the project its Sentry address names, not by a field the reporting SDK could set', () => {
    const payload = json('sentry-event-alert-triggered.json');
    (payload.data as { event: Record<string, unknown> }).event.project_slug = 'payments';
    const alert = readErrtrackAlert('event_alert', payload);
    assert.ok(!('skip' in alert));
    assert.equal(alert.projectSlug, 'front-end');
  });
  it('skips resources that are not alerts or new issues', () => {
    assert.ok('skip' in readErrtrackAlert('installation', { action: 'created', data: {} }));
    assert.ok('skip' in readErrtrackAlert('issue', { action: 'resolved', data: { issue: {} } }));
    assert.ok(!('skip' in readErrtrackAlert('issue', json('sentry-issue-created.json'))));
  });
});

describe('readWebhook', () => {
  const issue = { number: 5, title: 'Crash on save', body: 'stack', labels: [{ name: 'svc' }], author_association: 'OWNER' };
  it('queues an issue labelled svc and a trusted /svc comment', () => {
    assert.equal(readWebhook('issues', { action: 'labeled', label: { name: 'svc' }, issue, repository: { full_name: 'a/b' } }).kind, 'job');
    assert.equal(readWebhook('issues', { action: 'opened', issue, repository: { full_name: 'a/b' } }).kind, 'job');
    const comment = { id: 1, body: '/svc please fix', author_association: 'MEMBER' };
    assert.equal(readWebhook('issue_comment', { action: 'created', comment, issue }).kind, 'job');
  });
  it('skips comments from outsiders, other labels and other events', () => {
    assert.equal(readWebhook('issue_comment', { action: 'created', comment: { body: '/svc x', author_association: 'NONE' }, issue }).kind, 'skip');
    assert.equal(readWebhook('issue_comment', { action: 'created', comment: { body: '/svcx', author_association: 'OWNER' }, issue }).kind, 'skip');
    assert.equal(readWebhook('issues', { action: 'labeled', label: { name: 'bug' }, issue }).kind, 'skip');
    assert.equal(readWebhook('push', {}).kind, 'skip');
  });
  it('skips an issue opened with the svc label by an outsider (an issue template can set the label)', () => {
    for (const association of ['NONE', 'CONTRIBUTOR', undefined]) {
      const opened = { action: 'opened', issue: { ...issue, author_association: association }, repository: {} };
      assert.deepEqual(readWebhook('issues', opened), { kind: 'skip', reason: 'issue author may not start jobs' });
      // The template's label also arrives as a labeled event, sent by that author.
      const outsider = { ...issue, author_association: association, user: { login: 'mallory' } };
      const labeled = { action: 'labeled', label: { name: 'svc' }, sender: { login: 'mallory' }, issue: outsider };
      assert.deepEqual(readWebhook('issues', labeled), { kind: 'skip', reason: 'issue author may not start jobs' });
      // A maintainer who adds the label to that issue starts the job.
      assert.equal(readWebhook('issues', { ...labeled, sender: { login: 'maintainer' } }).kind, 'job');
    }
  });
});

describe('resolveRouteSecrets', () => {
  it('names the missing variable of each unconfigured route', () => {
    const { secrets, problems } = resolveRouteSecrets({});
    assert.match(secrets.errtrack.unavailable ?? '', /SVC_ERRTRACK_WEBHOOK_SECRET/);
    assert.ok(problems.warnings.some((w) => w.includes('CHATA_SIGNING_SECRET')));
  });
  it('uses ERRTRACK_CLIENT_SECRET when the primary variable is absent', () => {
    assert.equal(resolveRouteSecrets({ ERRTRACK_CLIENT_SECRET: 'x' }).secrets.errtrack.variable, 'ERRTRACK_CLIENT_SECRET');
  });
  it('disables every member of an equal pair, including the API token and source-host secret', () => {
    const { secrets, problems } = resolveRouteSecrets({ CHATA_SIGNING_SECRET: 'same', SVC_API_TOKEN: 'same', GITHUB_WEBHOOK_SECRET: 'g', TRACKERA_WEBHOOK_SECRET: 't' });
    assert.match(secrets.chata.unavailable ?? '', /CHATA_SIGNING_SECRET and SVC_API_TOKEN are equal/);
    assert.match(secrets.jobs.unavailable ?? '', /equal/);
    assert.equal(secrets.webhook.unavailable, null);
    assert.equal(secrets.trackera.unavailable, null);
    assert.equal(problems.errors.length, 1);
    assert.ok(!JSON.stringify(problems).includes('same'));
  });
  it('disables /chatb on a token that is not base64 and names a secret file that cannot be read', () => {
    const { secrets, problems } = resolveRouteSecrets({ CHATB_SECURITY_TOKEN: 'not base64!', SVC_API_TOKEN_FILE: '/nonexistent/token' });
    assert.equal(secrets.chatb.unavailable, 'Route /chatb is disabled: CHATB_SECURITY_TOKEN is not valid base64');
    assert.equal(secrets.jobs.unavailable, 'Route /jobs is not configured: set SVC_API_TOKEN_FILE');
    assert.ok(problems.errors.includes('SVC_API_TOKEN_FILE could not be read: ENOENT'));
  });
  it('says whether the operator set a secret, by value or by file, whether or not it can serve', () => {
    // mayRead (routes/jobs.ts) reads this, not the variable's name: set means reads need the bearer, or answer 503.
    assert.equal(resolveRouteSecrets({}).secrets.jobs.set, false);
    assert.equal(resolveRouteSecrets({ SVC_API_TOKEN: '' }).secrets.jobs.set, false);
    assert.equal(resolveRouteSecrets({ SVC_API_TOKEN: 'tok' }).secrets.jobs.set, true);
    const unreadable = resolveRouteSecrets({ SVC_API_TOKEN_FILE: '/nonexistent/token' }).secrets.jobs;
    assert.deepEqual([unreadable.set, unreadable.value], [true, undefined]);
    const equal = resolveRouteSecrets({ SVC_API_TOKEN: 'same', CHATA_SIGNING_SECRET: 'same' }).secrets.jobs;
    assert.deepEqual([equal.set, typeof equal.unavailable], [true, 'string']);
  });
});

describe('source readers on hostile JSON', () => {
  // Each of these used to reach `String(x)` on an object whose own toString is not a function.
  const poison = JSON.parse('{"toString": 1, "valueOf": null, "__proto__": {"x": 1}}') as unknown;
  it('trackera skips non-issue events whose type or action is an object with its own toString', () => {
    assert.equal(readTrackera({ type: poison }).kind, 'skip');
    assert.equal(readTrackera({ type: 'Issue', action: poison }).kind, 'skip');
    assert.equal(readTrackera({ type: 'Issue', action: 'create', data: poison, url: poison }).kind, 'skip');
    assert.equal(readTrackera({ type: 'Issue', action: 'create', data: [1, 2] }).kind, 'skip');
  });
  it('trackerb skips when changelog fields are objects with their own toString', () => {
    const items = [{ field: poison, fieldId: poison }, poison];
    const body = { webhookEvent: 'jira:issue_updated', changelog: { items } };
    assert.equal(readTrackerb(body, { assignees: ['a'], labels: ['l'] }).kind, 'skip');
  });
  it('source-host reads an issue whose number is an object', () => {
    const body = { action: 'labeled', label: { name: poison }, issue: { number: poison }, repository: poison };
    assert.equal(readWebhook('issues', body).kind, 'skip');
  });
});

describe('trackera snapshot under concurrent deliveries', () => {
  it('50 concurrent stages for one issue all succeed: each job keeps its own delivery whole, no temp files', async () => {
    const repo = tempDir('svc-snap-');
    after(() => rmSync(repo, { recursive: true, force: true }));
    const body = (i: number): Buffer => Buffer.from(JSON.stringify({ n: i, pad: 'x'.repeat(4096 + i) }));
    const bodies = Array.from({ length: 50 }, (_, i) => body(i));
    const staged = await Promise.all(bodies.map((b) => stageTrackeraSnapshot(repo, 'ENG-1', b)));
    staged.forEach((s, i) => s.keep(`job${i}`));
    await Promise.all(staged.map((s) => s.discard()));
    const dir = join(repo, '.svc', 'inbox', 'trackera');
    assert.deepEqual(readdirSync(dir).sort(), ['ENG-1.json', 'jobs']);
    assert.ok(bodies.some((b) => b.equals(readFileSync(join(dir, 'ENG-1.json')))), 'the newest snapshot is one delivered body, whole');
    bodies.forEach((b, i) => assert.deepEqual(readFileSync(join(dir, 'jobs', `job${i}.json`)), b));
    assert.equal(readdirSync(join(dir, 'jobs')).length, 50);
  });
  it('leaves nothing behind for a delivery whose job was not queued', async () => {
    const repo = tempDir('svc-snap-');
    after(() => rmSync(repo, { recursive: true, force: true }));
    const s = await stageTrackeraSnapshot(repo, 'ENG-2', Buffer.from('{}'));
    await s.discard();
    const dir = join(repo, '.svc', 'inbox', 'trackera');
    assert.deepEqual(readdirSync(dir), ['jobs']);
    assert.deepEqual(readdirSync(join(dir, 'jobs')), []);
  });
});
