// A run's log is read by everyone who may read the Control Plane: the secrets a CLI or a check quotes in its output (a
// pod's gate credential in its base URL or proxy, a token in a git URL) never reach it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';

const credential = mintJobCredential(randomBytes(32), { job: 'j1', run: 'r1', repo: 'acme' }, Date.now() + 3_600_000);
const TOKEN = 'ghp_pushtoken0123456789';
// What claude prints when its base URL does not answer, and git naming a remote with its token.
const LEAKY = `#!/bin/sh
cat > /dev/null
echo "API Error: Connection error. (base URL $ANTHROPIC_BASE_URL)" >&2
echo "proxy http://svc:$(echo "$ANTHROPIC_BASE_URL" | cut -d/ -f5)@svc-gate.test:3128"
echo "fatal: unable to access 'https://x-access-token:${TOKEN}@github.com/acme/api.git/'"
echo fixed >> a.txt
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

  it('keeps a gate job credential and a URL password out of events, provider.log and check logs, on disk and shipped',
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
      const files = ['events.jsonl', 'artifacts/provider.log', 'artifacts/checks/quotes.log']
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
    });
});
