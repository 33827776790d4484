// `svc start trackera:<id>` from the trigger server reads the payload of its own delivery.
import { describe, it, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { trackeraSpec } from '../../src/engine/spec.ts';

function issue(title: string): string {
  return JSON.stringify({ type: 'Issue', action: 'update', data: { identifier: 'LIN-34', title, description: `about ${title}` } });
}

describe('trackera snapshots', () => {
  const repo = mkdtempSync(join(tmpdir(), 'svc-trackera-'));
  after(() => rmSync(repo, { recursive: true, force: true }));
  const inbox = join(repo, '.svc', 'inbox', 'trackera');
  mkdirSync(join(inbox, 'jobs'), { recursive: true });
  writeFileSync(join(inbox, 'LIN-34.json'), issue('newest delivery'));
  writeFileSync(join(inbox, 'jobs', 'j01jd0000000000000000000001.json'), issue('the job delivery'));

  it('reads the delivery of its own job (SVC_JOB_ID) and removes it once read', async () => {
    const task = await trackeraSpec(repo, 'LIN-34', { SVC_JOB_ID: 'j01jd0000000000000000000001' });
    assert.match(task.brief, /the job delivery/);
    assert.equal(existsSync(join(inbox, 'jobs', 'j01jd0000000000000000000001.json')), false);
  });

  it('falls back to the newest delivery without a job snapshot, and never reads a path from SVC_JOB_ID', async () => {
    for (const env of [{}, { SVC_JOB_ID: 'j01jd0000000000000000000009' }, { SVC_JOB_ID: '../LIN-34' }]) {
      const task = await trackeraSpec(repo, 'LIN-34', env);
      assert.match(task.brief, /newest delivery/, JSON.stringify(env));
    }
    assert.equal(existsSync(join(inbox, 'LIN-34.json')), true);
  });
});

describe('security: trackera snapshots a repository holds itself', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-trackera-'));
  after(() => rmSync(root, { recursive: true, force: true }));
  const other = join(root, 'other-repo-snapshot.json');
  writeFileSync(other, issue('another repository\'s private issue'));
  const fallback = /No details were available offline/;

  /** A git repository with an empty trackera inbox. */
  function repoWithInbox(name: string): { repo: string; inbox: string } {
    const repo = join(root, name);
    const inbox = join(repo, '.svc', 'inbox', 'trackera');
    mkdirSync(join(inbox, 'jobs'), { recursive: true });
    execFileSync('git', ['init', '-q'], { cwd: repo });
    return { repo, inbox };
  }

  it('follows no link at a snapshot, a job\'s snapshot or the inbox folder, and removes nothing through one',
    async () => {
      const { repo, inbox } = repoWithInbox('links');
      symlinkSync(other, join(inbox, 'LIN-34.json'));
      symlinkSync(other, join(inbox, 'jobs', 'j01jd0000000000000000000001.json'));
      const task = await trackeraSpec(repo, 'LIN-34', { SVC_JOB_ID: 'j01jd0000000000000000000001' });
      assert.match(task.spec, fallback);
      assert.equal(existsSync(other), true);
      const linked = repoWithInbox('linked-inbox');
      rmSync(join(linked.repo, '.svc', 'inbox'), { recursive: true });
      mkdirSync(join(root, 'elsewhere', 'trackera'), { recursive: true });
      writeFileSync(join(root, 'elsewhere', 'trackera', 'LIN-34.json'), issue('another repository\'s private issue'));
      symlinkSync(join(root, 'elsewhere'), join(linked.repo, '.svc', 'inbox'));
      assert.match((await trackeraSpec(linked.repo, 'LIN-34', {})).spec, fallback);
    });

  it('reads no FIFO or file over 1 MiB there', async () => {
    const { repo, inbox } = repoWithInbox('special');
    execFileSync('mkfifo', [join(inbox, 'LIN-34.json')]);
    assert.match((await trackeraSpec(repo, 'LIN-34', {})).spec, fallback);
    writeFileSync(join(inbox, 'LIN-35.json'), issue('x'.repeat(1024 * 1024)));
    assert.match((await trackeraSpec(repo, 'LIN-35', {})).spec, fallback);
  });

  it('ignores a snapshot git tracks: a committed one is the repository\'s content, not a delivery', async () => {
    const { repo, inbox } = repoWithInbox('tracked');
    writeFileSync(join(inbox, 'LIN-34.json'), issue('committed by the repository'));
    writeFileSync(join(inbox, 'jobs', 'j01jd0000000000000000000001.json'), issue('committed job delivery'));
    execFileSync('git', ['add', '-A'], { cwd: repo });
    const task = await trackeraSpec(repo, 'LIN-34', { SVC_JOB_ID: 'j01jd0000000000000000000001' });
    assert.match(task.spec, fallback);
    assert.equal(existsSync(join(inbox, 'jobs', 'j01jd0000000000000000000001.json')), true);
  });
});

describe('trackera issues from the API (TRACKERA_API_KEY, TRACKERA_API_URL at a loopback stand-in)', () => {
  const KEY = 'lin_api_trackera_key_2718';
  const repo = mkdtempSync(join(tmpdir(), 'svc-trackera-api-'));
  const seen: Array<{ server: string; method?: string; headers: IncomingHttpHeaders; body: string }> = [];
  const servers: Server[] = [];
  let api = '';
  let other = '';

  /** A loopback server recording every request as `name`, answering with `reply`. */
  async function serve(name: string, reply: (res: import('node:http').ServerResponse) => void): Promise<string> {
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        seen.push({ server: name, method: req.method, headers: req.headers, body });
        reply(res);
      });
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  before(async () => {
    other = await serve('other', (res) => res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({ data: { issue: { identifier: 'LIN-9', title: 'from the other origin' } } })));
    api = await serve('api', (res) => {
      if (seen.at(-1)!.body.includes('LIN-77')) {
        res.writeHead(307, { location: `${other}/graphql` }).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: { issue: {
        identifier: 'LIN-9', title: 'Checkout fails', description: 'the pay button hangs', url: 'https://tracker.test/LIN-9',
      } } }));
    });
  });
  after(async () => {
    for (const server of servers) await new Promise<void>((r) => server.close(() => r()));
    rmSync(repo, { recursive: true, force: true });
  });

  it('posts the GraphQL query with the key to TRACKERA_API_URL and turns the answer into the spec', async () => {
    seen.length = 0;
    const task = await trackeraSpec(repo, 'LIN-9', { TRACKERA_API_KEY: KEY, TRACKERA_API_URL: `${api}/graphql` });
    assert.equal(task.brief, 'trackera:LIN-9 Checkout fails');
    assert.match(task.spec, /Link: https:\/\/tracker\.test\/LIN-9/);
    assert.match(task.spec, /the pay button hangs/);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.method, 'POST');
    assert.equal(seen[0]!.headers.authorization, KEY);
    assert.equal(seen[0]!.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(seen[0]!.body).variables, { id: 'LIN-9' });
  });

  it('follows no redirect: the key never reaches another origin, and the spec is the bare reference', async () => {
    seen.length = 0;
    const task = await trackeraSpec(repo, 'LIN-77', { TRACKERA_API_KEY: KEY, TRACKERA_API_URL: `${api}/graphql` });
    assert.deepEqual(seen.map((s) => s.server), ['api']);
    assert.equal(task.brief, 'trackera:LIN-77');
    assert.match(task.spec, /No details were available offline/);
  });

  it('takes an OAuth token set as "Bearer <token>" and sends it as set', async () => {
    seen.length = 0;
    const task = await trackeraSpec(repo, 'LIN-9', { TRACKERA_API_KEY: 'Bearer oauth_tok_31', TRACKERA_API_URL: `${api}/graphql` });
    assert.equal(task.brief, 'trackera:LIN-9 Checkout fails');
    assert.equal(seen[0]!.headers.authorization, 'Bearer oauth_tok_31');
  });

  it('lets no line break in TRACKERA_API_URL add a curl option (a second url here)', async () => {
    seen.length = 0;
    await trackeraSpec(repo, 'LIN-9', { TRACKERA_API_KEY: KEY, TRACKERA_API_URL: `${api}/graphql\nurl = "${other}/injected"` });
    assert.deepEqual(seen.map((s) => s.server), ['api']);
  });

  it('reads no ~/.curlrc: a location-trusted there does not take the key to a redirect\'s origin', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-trackera-curlrc-'));
    const saved = process.env.HOME;
    writeFileSync(join(home, '.curlrc'), 'location-trusted\n');
    process.env.HOME = home;
    try {
      seen.length = 0;
      const task = await trackeraSpec(repo, 'LIN-77', { TRACKERA_API_KEY: KEY, TRACKERA_API_URL: `${api}/graphql` });
      assert.deepEqual(seen.map((s) => s.server), ['api']);
      assert.equal(task.brief, 'trackera:LIN-77');
    } finally {
      process.env.HOME = saved;
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('sends the key over plain http to a loopback address only (0.0.0.0 is refused before anything is sent)', async () => {
    seen.length = 0;
    const port = new URL(api).port;
    const task = await trackeraSpec(repo, 'LIN-9', { TRACKERA_API_KEY: KEY, TRACKERA_API_URL: `http://0.0.0.0:${port}/` });
    assert.equal(task.brief, 'trackera:LIN-9');
    assert.deepEqual(seen, []);
  });

  it('reads nothing for a chat run, key set: chat text may name another team\'s issue', async () => {
    seen.length = 0;
    for (const origin of ['chata', 'chatb', 'errtrack', 'webhook']) {
      const task = await trackeraSpec(repo, 'LIN-9', {
        SVC_ORIGIN: origin, TRACKERA_API_KEY: KEY, TRACKERA_API_URL: `${api}/graphql`,
      });
      assert.equal(task.brief, 'trackera:LIN-9');
    }
    assert.deepEqual(seen, []);
    for (const origin of ['trackera', 'jobs', 'control']) {
      const task = await trackeraSpec(repo, 'LIN-9', {
        SVC_ORIGIN: origin, TRACKERA_API_KEY: KEY, TRACKERA_API_URL: `${api}/graphql`,
      });
      assert.equal(task.brief, 'trackera:LIN-9 Checkout fails');
    }
  });

  it('reads nothing without TRACKERA_API_KEY', async () => {
    seen.length = 0;
    const task = await trackeraSpec(repo, 'LIN-9', { TRACKERA_API_URL: `${api}/graphql` });
    assert.equal(task.brief, 'trackera:LIN-9');
    assert.deepEqual(seen, []);
  });
});
