// A run's log is read by everyone who may read the Control Plane: the secrets a CLI or a check quotes in its output (a
// pod's gate credential in its base URL or proxy, a token in a git URL) never reach it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, processesEnded, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';
import { Worker } from 'node:worker_threads';
import { pieceEnd, urlWithoutSecrets, redactSecrets } from '../../src/engine/text.ts';

const credential = mintJobCredential(randomBytes(32), { job: 'j1', run: 'r1', repo: 'acme' }, Date.now() + 3_600_000);
const TOKEN = 'ghp_pushtoken0123456789';
// What claude prints when its base URL does not answer, git naming a remote with its token, and a header whose token
// holds a character of two bytes, "tokàn" (C3 A0: the log is scrubbed as latin1, where A0 is a space to `\s`).
const LEAKY = `#!/bin/sh
cat > /dev/null
echo "API Error: Connection error. (base URL $ANTHROPIC_BASE_URL)" >&2
echo "proxy http://svc:$(echo "$ANTHROPIC_BASE_URL" | cut -d/ -f5)@svc-gate.test:3128"
printf 'Authorization: Bearer tok\\303\\240n\\n'
echo "fatal: unable to access 'https://x-access-token:${TOKEN}@github.com/acme/api.git/'"
echo fixed >> a.txt
`;

// An agent asking whether it may push, naming the remote with its token; once answered it does the work.
const ASKER = `#!/bin/sh
cat > /dev/null
if grep -q "Answer 1 from the operator" "$SVC_TASK_FILE"; then echo fixed >> a.txt; exit 0; fi
echo "May I push to https://x-access-token:${TOKEN}@github.com/acme/api.git?" > "$SVC_QUESTION_FILE"
`;

describe('secrets in a run log', () => {
  let control: TestControl;
  let repo: TestRepo;

  before(async () => {
    control = await startTestControl();
    repo = makeRepo({
      providers: { leaky: LEAKY },
      policy: { checks: [{ name: 'quotes', run: ['sh', '-c', `echo "pushing to https://u:${TOKEN}@h/"`] }] },
    });
  });
  after(async () => {
    await control.close();
    repo.cleanup();
  });

  it('keeps a gate job credential and a URL password out of events, state.json, provider and check logs, and shipped',
    async () => {
      const gate = 'http://svc-gate.test:3128';
      const env = {
        ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: control.url,
        ANTHROPIC_BASE_URL: `${gate}/_job/${credential}/_model/anthropic`,
      };
      const child = spawn(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'leaky'],
        { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const status = await new Promise((resolve) => child.on('close', resolve));
      assert.equal(status, 0, stderr);
      const { source, run } = JSON.parse(stdout.trim().split('\n')[0]!);
      const dir = join(repo.repo, '.svc', 'runs', run);
      // state.json too: the provider's last words are kept there, and it goes to the signer's copy and the shipper.
      const files = ['events.jsonl', 'artifacts/provider.log', 'artifacts/checks/quotes.log', 'state.json']
        .map((f) => readFileSync(join(dir, f), 'utf8'));
      const events = await control.request('GET', `/v1/runs/${source}/${run}/events`);
      assert.equal(events.status, 200);
      const shipped = await Promise.all(['provider.log', 'checks/quotes.log']
        .map(async (a) => (await control.request('GET', `/v1/runs/${source}/${run}/artifact/${a}`)).text));
      for (const text of [...files, events.text, ...shipped]) {
        assert.equal(text.includes(credential), false, text);
        assert.equal(text.includes(credential.split('.')[2]!), false, 'no part of its MAC either');
        assert.equal(text.includes(TOKEN), false, text);
      }
      // The lines are still there, with the secrets cut: what went wrong can still be read.
      assert.match(files[1]!, /base URL http:\/\/svc-gate\.test:3128\/_job\/g1\.\*\*\*\/_model\/anthropic/);
      assert.match(files[1]!, /proxy http:\/\/\*\*\*@svc-gate\.test:3128/);
      assert.match(files[1]!, /'https:\/\/\*\*\*@github\.com\/acme\/api\.git\/'/);
      assert.match(files[2]!, /https:\/\/\*\*\*@h\//);
      assert.match(events.text, /_job\/g1\.\*\*\*\/_model/);
      assert.match(files[3]!, /https:\/\/\*\*\*@github\.com\/acme\/api\.git/, 'its last words, cut');
      const log = readFileSync(join(dir, 'artifacts/provider.log'));
      assert.match(new TextDecoder('utf-8', { fatal: true }).decode(log), /^Authorization: Bearer \*\*\*$/m,
        'the whole token cut, and no half of a character left');
    });
});

describe('secrets in a question', () => {
  it('keeps a URL password out of the question state.json holds while the run waits, and once it is answered',
    async () => {
      const repo = makeRepo({ providers: { asker: ASKER } });
      try {
        const env = {
          ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
        };
        const opts = { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'] };
        const started = await runChild(process.execPath,
          [CLI, 'start', '--brief', 'append fixed', '--provider', 'asker', '--detach'], opts);
        assert.equal(started.code, 0, started.stderr);
        const { run } = JSON.parse(started.stdout.trim().split('\n')[0]!) as { run: string };
        const state = () => readFileSync(join(repo.repo, '.svc', 'runs', run, 'state.json'), 'utf8');
        const blocked = await waitFor(() => (JSON.parse(state()).status === 'blocked' ? state() : null), 'a block');
        assert.equal(blocked.includes(TOKEN), false, blocked);
        assert.match(JSON.parse(blocked).question, /^May I push to https:\/\/\*\*\*@github\.com\/acme\/api\.git\?$/);
        const answered = await runChild(process.execPath, [CLI, 'answer', `local/${run}`, 'yes'], opts);
        assert.equal(answered.code, 0, answered.stderr);
        const done = await waitFor(() => (JSON.parse(state()).status === 'succeeded' ? state() : null), 'the end');
        assert.equal(done.includes(TOKEN), false, done);
        assert.match(JSON.parse(done).provider_session.questions[0], /https:\/\/\*\*\*@github\.com/);
      } finally {
        await processesEnded(repo.root);
        repo.cleanup();
      }
    });
});

// An agent writes what its log holds: a line shaped to make the scrub rescan it from each character would block the
// worker's loop for minutes. Each case's own timeout is the guard (a megabyte took the old patterns minutes); the scrub
// runs in a thread of its own, so that a scrub that never ends cannot hold the timeout itself off.
describe('scrubbing a hostile line', () => {
  const MB = 1024 * 1024;
  const schemes = 'a-'.repeat(MB / 2);
  const urls = 'x://'.repeat(MB / 4);
  const scrub = <T = string>(module: string, name: string, text: string, signal: AbortSignal, ...more: string[]) => {
    const worker = new Worker(`const { parentPort, workerData: d } = require('node:worker_threads');
      import(d.module).then((m) => parentPort.postMessage(m[d.name](d.text, ...d.more)));`,
    { eval: true, workerData: { module: new URL(module, import.meta.url).href, name, text, more } });
    signal.addEventListener('abort', () => void worker.terminate());
    return new Promise<T>((resolve, reject) => worker.once('message', resolve).once('error', reject));
  };

  it('cuts a log line of a million scheme characters or URL starts in one pass', { timeout: 30_000 }, async (t) => {
    const cut = (text: string) => scrub('../../src/engine/text.ts', 'redactSecrets', text, t.signal);
    assert.equal(await cut(schemes), schemes);
    assert.equal(await cut(urls), urls);
    assert.equal(await cut(`${schemes} https://u:${TOKEN}@h/`), `${schemes} https://***@h/`);
  });

  it('cuts a URL of a million parameter starts, or of one long parameter name, in one pass', { timeout: 30_000 },
    async (t) => {
      const cut = (text: string, keep = 'marked') =>
        scrub('../../src/engine/text.ts', 'redactSecrets', text, t.signal, keep);
      const starts = `https://h/${'?a'.repeat(MB / 2)}`;
      assert.equal(await cut(starts), starts);
      const name = `https://h/?${'token'.repeat(MB / 5)}`;
      assert.equal(await cut(name), name);
      assert.equal(await cut(`${name}=${TOKEN}`), `${name}=***`);
      assert.equal(await cut(`${schemes} ${urls}`, 'host'), `${schemes} x://x:/…`);
      const encoded = `https://${'%25'.repeat(MB / 3)}`;
      assert.equal(await cut(`${encoded} https%25253A%25252F%25252F${'%2540'.repeat(MB / 5)}`, 'host'),
        'https:///… https%25253A%25252F%25252F');
      const spaced = 'x://u:p '.repeat(MB / 8);
      assert.equal(await cut(spaced), spaced);
      assert.equal(await cut(`${spaced}x://u:p q@h`), `${spaced}x://***@h`);
    });

  it('finds where a piece of a million header names or scheme characters may end in one pass', { timeout: 30_000 },
    async (t) => {
      const end = (text: string) => scrub<number>('../../src/engine/text.ts', 'pieceEnd', text, t.signal);
      const headers = 'Authorization: '.repeat(MB / 16);
      assert.equal(await end(headers), headers.length - 'Authorization: '.length);
      assert.equal(await end(schemes), schemes.length);
      assert.equal(await end(`${schemes} https://u:${TOKEN}`), schemes.length + 1);
      const spaced = `x Authorization:${' '.repeat(MB)}`;
      assert.equal(await end(spaced), 2);
      const json = (text: string) => scrub('../../src/engine/text.ts', 'jsonWithoutSecrets', text, t.signal);
      assert.equal(await json(urls), JSON.stringify(urls));
    });

  it('cuts a git config value of a million scheme characters or URL starts in one pass', { timeout: 30_000 },
    async (t) => {
      const cut = (text: string) => scrub('../../src/engine/sandbox.ts', 'scrubbed', text, t.signal);
      assert.equal(await cut(schemes), schemes);
      assert.equal(await cut(urls), urls);
      assert.equal(await cut(`${schemes} https://u:${TOKEN}@h/p?private_token=${TOKEN}`), `${schemes} https://h/p`);
      const params = `https://h/${';a'.repeat(MB / 4)}${'&'.repeat(MB)}a`;
      assert.equal(await cut(params), params);
      assert.equal(await cut(`${params}&token=${TOKEN}`), params);
    });
});

describe('what the scrub keeps', () => {
  it('cuts a URL\'s user info but never across a quote: a JSON line without spaces keeps its fields', () => {
    const json = '{"homepage":"https://example.com","author":"dev@example.org"}';
    assert.equal(redactSecrets(json), json);
    assert.equal(redactSecrets(`{"url":"https://x-access-token:${TOKEN}@github.com/acme/api.git"}`),
      '{"url":"https://***@github.com/acme/api.git"}');
    assert.equal(redactSecrets(`<https://u:${TOKEN}@h/> 'ssh://git@h:22/r'`), "<https://***@h/> 'ssh://***@h:22/r'");
  });

  it('cuts the credential of an Authorization or Proxy-Authorization header, curl -v\'s or a JSON one', () => {
    const basic = Buffer.from(`svc:${credential}`).toString('base64');
    assert.equal(redactSecrets(`> Proxy-Authorization: Basic ${basic}\r\n> Accept: */*`),
      '> Proxy-Authorization: Basic ***\r\n> Accept: */*');
    assert.equal(redactSecrets(`< authorization: Bearer ${TOKEN}`), '< authorization: Bearer ***');
    assert.equal(redactSecrets(`Authorization:${TOKEN}`), 'Authorization:***');
    assert.equal(redactSecrets(`{"Authorization":"token ${TOKEN}","x":1}`), '{"Authorization":"token ***","x":1}');
  });

  it('cuts a header inside JSON-escaped text and leaves the line JSON: a stream-json event keeps its usage', () => {
    const command = `curl -H "Authorization: Bearer ${TOKEN}" https://api.github.com/user`;
    const line = JSON.stringify({ type: 'assistant', message: { content: [{ type: 'tool_use', input: { command } }],
      usage: { output_tokens: 7 } } });
    const cut = redactSecrets(line);
    assert.equal(cut.includes(TOKEN), false, cut);
    const event = JSON.parse(cut);
    assert.equal(event.message.content[0].input.command,
      'curl -H "Authorization: Bearer ***" https://api.github.com/user');
    assert.equal(event.message.usage.output_tokens, 7);
    // A JSON header object quoted inside a JSON string: its key's quotes are escaped too.
    const nested = JSON.stringify({ text: JSON.stringify({ Authorization: `Bearer ${TOKEN}` }) });
    const nestedCut = redactSecrets(nested);
    assert.equal(nestedCut.includes(TOKEN), false, nestedCut);
    assert.equal(JSON.parse(JSON.parse(nestedCut).text).Authorization, 'Bearer ***');
  });

  it('ends a piece where no header is cut from its credential, at every cut through a header, escaped or not', () => {
    const forms = [`"Authorization": "Bearer ${TOKEN}"`, `\\"Authorization\\": \\"Bearer ${TOKEN}\\"`,
      `'Authorization': 'token ${TOKEN}'`, `> Proxy-Authorization: Basic ${TOKEN}`];
    for (const form of forms) {
      const line = `{"x":1,"cmd":"curl -H ${form} https://h/"}`;
      // A piece that would end at `cut`: pieceEnd says where it does; both sides are scrubbed on their own.
      for (let cut = 1; cut < line.length; cut++) {
        const end = pieceEnd(line.slice(0, cut));
        const pieces = redactSecrets(line.slice(0, end)) + redactSecrets(line.slice(end));
        assert.equal(pieces.includes(TOKEN.slice(4)), false, `${line} cut at ${cut}: ${pieces}`);
      }
    }
  });

  it('holds a header back with its credential however far its name is from the cut', () => {
    const line = `{"cmd":"curl -H 'Authorization:${' '.repeat(300)}Bearer ${TOKEN}' https://h/"}`;
    for (let cut = line.indexOf('Bearer'); cut < line.length; cut++) {
      const end = pieceEnd(line.slice(0, cut));
      const pieces = redactSecrets(line.slice(0, end)) + redactSecrets(line.slice(end));
      assert.equal(pieces.includes(TOKEN.slice(4)), false, `cut at ${cut}: ${pieces.slice(-60)}`);
    }
  });

  it('cuts a secret-named parameter of a URL\'s query or fragment and keeps the others', () => {
    assert.equal(redactSecrets(`GET https://gitlab.example/api/v4/projects?private_token=${TOKEN}&per_page=5 200`),
      'GET https://gitlab.example/api/v4/projects?private_token=***&per_page=5 200');
    assert.equal(redactSecrets(`"https://b.s3.example/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=${TOKEN}"`),
      '"https://b.s3.example/k?X-Amz-Credential=***&X-Amz-Signature=***"');
    assert.equal(redactSecrets(`https://app.example/cb#access_token=${TOKEN}&state=s1`),
      'https://app.example/cb#access_token=***&state=s1');
    // A JSON-escaped line: the value stops at the escape, what follows stays.
    assert.equal(redactSecrets(`https://h/?sig=${TOKEN}\\nnext`), 'https://h/?sig=***\\nnext');
  });

  it('cuts the whole user info of a URL named alone, a password holding an @ or a quote', () => {
    assert.equal(urlWithoutSecrets(`https://u:p@${TOKEN}@github.com/acme/api.git`),
      'https://***@github.com/acme/api.git');
    assert.equal(urlWithoutSecrets(`https://u:p"'\\${TOKEN}@github.com/acme/api.git`),
      'https://***@github.com/acme/api.git');
    assert.equal(urlWithoutSecrets(`https://u:p ${TOKEN}@github.com/acme/api.git`),
      'https://***@github.com/acme/api.git');
    // Free text starting with a URL is not a URL alone: a space ends the URL, a later `@` is no user info's.
    const refused = 'https://h:8080 refused; mail ops@example.org';
    assert.equal(redactSecrets(refused), refused);
    // A line of several URLs is free text: each one's user info is cut.
    assert.equal(redactSecrets(`https://u:${TOKEN}@h/ x https://u:${TOKEN}@h/`), 'https://***@h/ x https://***@h/');
    // In free text a quote still ends it: a JSON line keeps its fields.
    assert.equal(redactSecrets('{"u":"https://example.com","author":"dev@example.org"}'),
      '{"u":"https://example.com","author":"dev@example.org"}');
  });

  it('cuts user info and secret parameters whatever precedes a scheme, and a parameter after any separator', () => {
    for (const before of ['retry -', 'HTTP 404.', '+', '1', 'x.']) {
      assert.equal(redactSecrets(`${before}https://oauth2:${TOKEN}@gitlab.example/x`),
        `${before}https://***@gitlab.example/x`);
    }
    assert.equal(redactSecrets(`https://h/x&token=${TOKEN}`), 'https://h/x&token=***');
    assert.equal(redactSecrets(`GET https://h/x&access_token=${TOKEN} 200`), 'GET https://h/x&access_token=*** 200');
  });

  it('keeps a URL\'s scheme and host alone where its path is the credential, and no user info for git', () => {
    assert.equal(redactSecrets(`POST https://u:${TOKEN}@hooks.chata.example/services/T0/B0/${TOKEN}?a=1: 500`, 'host'),
      'POST https://hooks.chata.example/… 500');
    // Whatever precedes a scheme, and a path percent-encoded.
    for (const before of ['retry -', 'failed ...', 'HTTP 404.', 'x +', 'url=']) {
      assert.equal(redactSecrets(`${before}https://hooks.chata.example/services/${TOKEN} 500`, 'host'),
        `${before}https://hooks.chata.example/… 500`);
    }
    assert.equal(redactSecrets(`url=https://hooks.chata.example%2Fservices%2F${TOKEN}`, 'host'),
      'url=https://hooks.chata.example/…');
    assert.equal(redactSecrets(`url=https%3A%2F%2Fhooks.chata.example%2Fservices%2F${TOKEN}`, 'host'),
      'url=https%3A%2F%2Fhooks.chata.example/…');
    assert.equal(redactSecrets(`"url":"https:\\/\\/hooks.chata.example\\/services\\/${TOKEN}"`, 'host'),
      '"url":"https:\\/\\/hooks.chata.example/…');
    assert.equal(redactSecrets(`url = https://u:${TOKEN}@h/p.git?private_token=${TOKEN}#x`, 'bare'),
      'url = https://h/p.git');
  });

  it('cuts from the git config an agent sees an encoded user info and every `;` or `&` parameter', () => {
    const bare = (text: string) => redactSecrets(text, 'bare');
    assert.equal(bare(`url = https://user%40corp:${TOKEN}@h/p.git`), 'url = https://h/p.git');
    assert.equal(bare(`url = https://${TOKEN}%3Ax@h/p.git`), 'url = https://h/p.git');
    // An `@` encoded: a host holds no `%`, so it still ends a user info.
    assert.equal(bare(`url = https://u%3A${TOKEN}%40h/p.git`), 'url = https://h/p.git');
    assert.equal(bare(`url = https://h/p.git?x=1&access_token=${TOKEN}`), 'url = https://h/p.git');
    assert.equal(bare(`url = https://h/p.git;token=${TOKEN}`), 'url = https://h/p.git');
    assert.equal(bare(`url = https://h/p.git&access_token=${TOKEN}`), 'url = https://h/p.git');
    // A path's own `;` or `&` that starts no parameter stays: git needs it.
    assert.equal(bare('url = https://h/a&b;c.git'), 'url = https://h/a&b;c.git');
    // A URL encoded whole is no remote git can use: its host alone, as a notification error keeps.
    assert.equal(bare(`url = https%3A%2F%2Fu%3A${TOKEN}%40h%2Fp.git%3Ftoken%3D${TOKEN}`), 'url = https%3A%2F%2Fh/…');
  });

  it('keeps of a URL encoded once or more in a notification error its scheme and host alone', () => {
    const host = (text: string) => redactSecrets(text, 'host');
    assert.equal(host(`POST https%253A%252F%252Fuser%253A${TOKEN}%2540hooks.example%252Fs%252F${TOKEN} failed`),
      'POST https%253A%252F%252Fhooks.example/… failed');
    assert.equal(host(`POST https:%2F%2Fuser:${TOKEN}@hooks.example/s/${TOKEN} failed`),
      'POST https:%2F%2Fhooks.example/… failed');
    assert.equal(host(`POST https:%2F%2Fuser%3A${TOKEN}%40hooks.example%2Fs failed`),
      'POST https:%2F%2Fhooks.example/… failed');
    assert.equal(host(`POST https%3A%2F%2Fuser%3A${TOKEN}%40hooks.example%2Fs failed`),
      'POST https%3A%2F%2Fhooks.example/… failed');
    assert.equal(host(`POST https://user%3A${TOKEN}%40hooks.example/s failed`),
      'POST https://hooks.example/… failed');
    // A password's slash is encoded once more than the URL's own: it starts no path, and the user name is no host.
    assert.equal(host(`POST https%3A%2F%2Fbot%3Aa%252F${TOKEN}%40h%2Fp failed`), 'POST https%3A%2F%2Fh/… failed');
    assert.equal(redactSecrets(`url=https%3A%2F%2Fbot%3Aa%252F${TOKEN}%40h%2Fp`, 'bare'), 'url=https%3A%2F%2Fh/…');
    assert.equal(host(`POST https%253A%252F%252Fbot%253Aa%25252F${TOKEN}%2540h%252Fp failed`),
      'POST https%253A%252F%252Fh/… failed');
    // A URL inside another's query goes with the path it is in.
    assert.equal(host(`GET https://h/login?next=https%3A%2F%2Fu%3A${TOKEN}%40x failed`), 'GET https://h/… failed');
  });

  it('cuts a password holding a space up to its `@` on the line, never ordinary text after a URL', () => {
    assert.equal(redactSecrets(`fatal: https://u:pa ss${TOKEN}@github.com/acme/api.git`),
      'fatal: https://***@github.com/acme/api.git');
    assert.equal(redactSecrets(`{"cmd":"git clone https://u:a b${TOKEN}@h/r.git x"}`),
      '{"cmd":"git clone https://***@h/r.git x"}');
    // The same where a URL keeps its host alone, or what git needs.
    assert.equal(redactSecrets(`POST https://u:pa ss${TOKEN}@hooks.example/s/${TOKEN} failed`, 'host'),
      'POST https://hooks.example/… failed');
    assert.equal(redactSecrets(`url = https://u:pa ss${TOKEN}@h/p.git`, 'bare'), 'url = https://h/p.git');
    // A port, a colon ending a sentence, a path, a quote, a line break or far off: nothing is cut.
    for (const text of ['redis://cache:6379 connected as ops@example.org', 'https://h: refused, mail ops@example.org',
      'https://h:8080/x is down; ops@example.org', 'see https://h:x/y and ops@example.org',
      '{"u":"https://h:x","m":"ops@example.org"}', 'https://h:x\nops@example.org',
      `https://h:x ${'word '.repeat(20)}ops@example.org`]) {
      assert.equal(redactSecrets(text), text);
    }
    // A port followed by a comma, a stop, a bracket or a query is a port too, and a bracketed host has no user name:
    // the line stays whole, and a notification's error names the URL's own host, not the mail address's.
    for (const text of ['The app runs at http://localhost:3000, log in as admin@example.com',
      'Open http://localhost:5173. Sign in with test@example.com', 'see (http://h:8080) or mail ops@example.org',
      'started http://[::1]:8080 by ci@host', 'docker://ubuntu:22.04 pulled by ci@host',
      'POST https://hooks.chat.example:443, retry later; owner ops@example.org']) {
      assert.equal(redactSecrets(text), text);
      assert.equal(redactSecrets(text, 'host'), text);
    }
    const jdbc = 'jdbc:mysql://db:3306?useSSL=false connected as app@db';
    assert.equal(redactSecrets(jdbc), jdbc);
    assert.equal(redactSecrets(jdbc, 'host'), 'jdbc:mysql://db:3306/… connected as app@db');
  });

  it('never crosses a JSON escape: a URL\'s user info stops at a backslash', () => {
    const config = JSON.stringify({ out: 'http.proxy=http://proxy.corp:3128\nuser.email=dev@example.org' });
    assert.equal(redactSecrets(config), config);
  });
});
