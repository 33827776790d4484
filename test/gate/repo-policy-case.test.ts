// The attack: the operator narrows one repository's egress (`repos["acme/web"]`), and a job for that repository is
// routed as `Acme/Web` — the served-repositories file, a webhook, or GitHub itself spells owner/name in another case.
// A case-sensitive lookup gave that job the default lists, wider than its own. Owner/name is compared without regard
// to case; a policy file naming one repository twice in two cases is refused. Loopback only.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { loadGatePolicy, repoPolicy } from '../../src/gate/main.ts';
import { GatePolicyError } from '../../src/gate/policy.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';
import {
  gateRequest, proxyAuth, recordingConnect, startUpstream, tableResolver, tempDir, type Upstream,
} from './helpers.ts';

const SECRET = Buffer.from('repo-policy-case-secret-0123456789abcdef');

describe("a job's repository policy, whatever the case of its name", () => {
  const tmp = tempDir();
  let upstream: Upstream;
  let gate: Gate;

  before(async () => {
    upstream = await startUpstream('127.0.0.2');
    const file = join(tmp.path, 'policy.json');
    writeFileSync(file, JSON.stringify({
      allow: ['wide.test', `127.0.0.2:${upstream.port}`],
      repos: { 'acme/web': { allow: ['narrow.test', `127.0.0.2:${upstream.port}`] } },
    }));
    const policies = loadGatePolicy(file);
    gate = await startGate({
      policy: policies.fallback, tcpPort: 0, connect: recordingConnect().connect,
      resolve: tableResolver({ 'wide.test': ['127.0.0.2'], 'narrow.test': ['127.0.0.2'] }).resolve,
      clients: { secret: SECRET, maxPerClient: 4, policyFor: (who) => repoPolicy(policies, who.repo) },
    });
  });

  after(async () => {
    await gate.close();
    await upstream.close();
    tmp.remove();
  });

  for (const repo of ['acme/web', 'Acme/Web', 'ACME/WEB']) {
    it(`decides a job routed as ${repo} by acme/web's narrower lists`, async () => {
      const headers = proxyAuth(mintJobCredential(SECRET, { job: 'j', run: `r-${repo}`, repo }, Date.now() + 60_000));
      const at = { port: gate.port ?? 0 };
      assert.equal((await gateRequest(at, `http://wide.test:${upstream.port}/`, { headers })).status, 403);
      assert.equal((await gateRequest(at, `http://narrow.test:${upstream.port}/`, { headers })).status, 200);
    });
  }

  it('refuses a policy file that names one repository twice in two cases', () => {
    const file = join(tmp.path, 'twice.json');
    writeFileSync(file, JSON.stringify({ repos: { 'acme/web': { allow: ['a.test'] }, 'Acme/Web': { allow: [] } } }));
    assert.throws(() => loadGatePolicy(file), GatePolicyError);
  });

  it('refuses a policy file that is not an object, or whose repos or a repository entry is not one', () => {
    const file = join(tmp.path, 'shapes.json');
    for (const [value, pattern] of [[[], file], [{ repos: [] }, 'repos'], [{ repos: { 'acme/web': ['a.test'] } },
      'repos.acme/web']] as const) {
      writeFileSync(file, JSON.stringify(value));
      assert.throws(() => loadGatePolicy(file), (err) => err instanceof GatePolicyError && err.pattern === pattern);
    }
  });
});
