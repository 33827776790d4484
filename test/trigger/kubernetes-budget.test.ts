// A Kubernetes job pod behind the real `svc gate serve`, with the real svc in each container (the stand-in kubelet
// runs them as local processes): the agent's CLI reports a cent while its model calls through the gate cost more than
// the repository's max_usd. The trigger names that budget in the pod's gate credential; the gate refuses the call past
// it, and the signer ends the run stopped at its budget. The model API is a loopback stand-in.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createKubernetesExecutor, kubeJobName } from '../../src/trigger/kubernetes-executor.ts';
import { silentLogger } from '../../src/log.ts';
import { newRunId } from '../../src/engine/ids.ts';
import { startKubeStandIn, podSecrets, type KubeStandIn } from './kube-stand-in.ts';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const SECRET = 'kubernetes-budget-gate-secret-0123456789abcdef';
const CP_TOKEN = 'cp-token-budget';

// The agent: does the task, calls the model three times through the gate, and reports a cent.
const AGENT = `#!/bin/sh
cat > /dev/null
echo fixed >> a.txt
for i in 1 2 3; do
  curl -s -o /dev/null -X POST -H 'content-type: application/json' -d '{}' "$ANTHROPIC_BASE_URL/v1/messages"
done
echo '{"type":"svc.cost","usd":0.01,"tokens_in":10,"tokens_out":5}'
`;

const POLICY = { checks: [{ name: 'test', run: ['grep', '-q', 'fixed', 'a.txt'] }], max_usd: 0.25 };

function git(cwd: string, args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } });
}

describe('a Kubernetes pod held to its max_usd by svc gate serve', () => {
  let repo: TestRepo;
  let kube: KubeStandIn;
  let cp: TestControl;
  let model: Server;
  /** Another vendor's API, whose key the gate does not hold: a CLI's own login may tunnel there. */
  let vendor: Server;
  let gate: ChildProcess;
  let gateOut = '';
  let gatePort = 0;
  let modelCalls = 0;

  before(async () => {
    repo = makeRepo({ policy: POLICY, providers: { spender: AGENT } });
    const config = { provider: 'spender', providers: { spender: { command: [join(repo.bin, 'spender.sh')] } } };
    writeFileSync(join(repo.repo, '.svc', 'config.json'), JSON.stringify(config));
    git(repo.repo, ['add', '.svc/config.json', '.svc/policy.json']);
    git(repo.repo, ['commit', '-qm', 'svc policy']);
    git(repo.repo, ['push', '-q', 'origin', 'main']);
    // $0.15 a call by svc's price table: two calls pass $0.25.
    model = createServer((req, res) => {
      modelCalls += 1;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ model: 'claude-sonnet-4-5', usage: { input_tokens: 0, output_tokens: 10_000 } }));
    });
    await new Promise<void>((r) => model.listen(0, '127.0.0.1', r));
    vendor = createServer((_req, res) => res.end());
    await new Promise<void>((r) => vendor.listen(0, '127.0.0.1', r));
    const policy = join(repo.root, 'gate-policy.json');
    writeFileSync(policy, JSON.stringify({ allow: [`127.0.0.1:${(vendor.address() as AddressInfo).port}`] }));
    writeFileSync(join(repo.root, 'gate-secret'), SECRET, { mode: 0o600 });
    gate = spawn(process.execPath, [CLI, 'gate', 'serve', '--port', '0', '--policy', policy], {
      env: {
        PATH: process.env.PATH, HOME: join(repo.root, 'gate-home'), ANTHROPIC_API_KEY: 'sk-ant-real',
        ANTHROPIC_BASE_URL: `http://127.0.0.1:${(model.address() as AddressInfo).port}`,
        SVC_GATE_SECRET_FILE: join(repo.root, 'gate-secret'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gate.stdout!.setEncoding('utf8').on('data', (c: string) => (gateOut += c));
    gatePort = Number(await waitFor(() => /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(gateOut)?.[1], 'the gate'));
    cp = await startTestControl({ token: CP_TOKEN });
    podSecrets.set('svc-control-budget', CP_TOKEN);
    kube = await startKubeStandIn(join(repo.root, 'pods'), { svc: CLI });
  });
  after(async () => {
    await kube.close();
    await cp.close();
    podSecrets.delete('svc-control-budget');
    gate.kill('SIGTERM');
    model.closeAllConnections();
    model.close();
    vendor.close();
    rmSync(repo.root, { recursive: true, force: true });
  });

  /** One job through the Kubernetes executor, its pod behind the gate; the run's outcome once its pod ended. */
  async function runJob(id: string) {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH, HOME: repo.home, LANG: 'C', SVC_CONTROL_URL: cp.url,
      SVC_K8S_CONTROL_TOKEN_SECRET: 'svc-control-budget', SVC_K8S_RUN_CONTROL_TOKEN_SECRET: 'svc-control-run', SVC_K8S_API_URL: kube.url,
      SVC_K8S_SA_DIR: join(repo.root, 'no-sa'), SVC_K8S_IMAGE: 'registry.test/svc:1',
      SVC_K8S_REPO_URL: `file://${repo.origin}`, SVC_K8S_NAMESPACE: 'build',
      SVC_K8S_GATE_URL: `http://127.0.0.1:${gatePort}`, SVC_GATE_SECRET_FILE: join(repo.root, 'gate-secret'),
    };
    const ex = createKubernetesExecutor({
      env, log: silentLogger, pollMs: 50, launchTimeoutMs: 120_000, shipGraceMs: 10_000, controlUrl: cp.url,
      controlToken: CP_TOKEN,
    });
    // A job's origin, as the trigger's job loop always gives one: the pod's run is a server's (SVC_SERVER_SANDBOX=none).
    const args = ['start', '--brief', 'fix the greeting'];
    const launched = await ex.launch({ run: newRunId(), workdir: repo.repo, id, origin: 'jobs', args });
    const job = kube.jobs.get(kubeJobName(id));
    assert.equal(launched.error, null, job?.stderr);
    const outcome = await ex.follow(launched.run!, new AbortController().signal, { reattach: false, workdir: '/' });
    assert.ok(outcome && outcome !== 'aborted', job?.stderr);
    return { launched, outcome, job };
  }

  it('refuses the call past the budget the gate metered, whatever the CLI reports; the run ends stopped', async () => {
    // The server's checkout of the repository, whose policy names the budget.
    const { launched, outcome, job } = await runJob('j0000000000budget0000000001');
    assert.equal(outcome.status, 'stopped', `${outcome.error}\n${job?.stderr}`);
    assert.equal(outcome.error, 'Stopped at the max_usd budget: spent $0.30 of $0.25, metered by the gate');
    assert.equal(outcome.pr_url, null);
    assert.equal(outcome.cost_usd, 0.3, 'the job\'s outcome (its completion summary) states the gate\'s cost');
    // What the Control Plane holds: the signer's state, the gate's cost beside the agent's cent.
    const shown = (await cp.request('GET', `/v1/runs/k8s/${launched.run!.run}`)).json;
    assert.deepEqual([shown.status, shown.cost_usd, shown.reported?.cost_usd], ['stopped', 0.3, 0.01]);
    assert.equal(shown.failure?.class, 'budget');
    assert.equal(modelCalls, 2, 'the third call never reached the model API');
    const refusal = new RegExp('"egress":\\{[^\\n]*"decision":"denied"[^\\n]*"reason":"the run\'s budget of ' +
      '\\$0\\.25 is reached \\(metered \\$0\\.30\\): the run stops here[^\\n]*"status":429');
    await waitFor(() => refusal.test(gateOut), 'the refusal in the gate\'s log');
  });

  it('never asks a pod\'s run to raise a budget its agent reports spent: the signer stops it on the larger figure',
    async () => {
      // One call ($0.15, under the budget) while the CLI reports a dollar, after a CONNECT tunnel (to a vendor whose
      // key the gate does not hold, with a login of the CLI's own: calls the gate cannot read): no question; the gate
      // lets the call through (it holds the run on what it metered), and the signer stops the run on the report (the
      // larger figure, since the tunnel may have carried calls). Without the tunnel the metered cost alone would
      // decide (pod-signer-network.test.ts). A tunnel to the model API whose key the gate holds is refused.
      const api = `127.0.0.1:${(vendor.address() as AddressInfo).port}`;
      const tunnel = `curl -s -o /dev/null --max-time 20 --noproxy '' -p -x "$HTTPS_PROXY" http://${api}/ || true\n`;
      const honest = AGENT.replace('1 2 3', '1').replace('"usd":0.01', '"usd":1.00').replace('for i', `${tunnel}for i`);
      writeFileSync(join(repo.bin, 'honest.sh'), honest, { mode: 0o755 });
      const config = { provider: 'honest', providers: { honest: { command: [join(repo.bin, 'honest.sh')] } } };
      writeFileSync(join(repo.repo, '.svc', 'config.json'), JSON.stringify(config));
      git(repo.repo, ['commit', '-qam', 'the honest agent']);
      git(repo.repo, ['push', '-q', 'origin', 'main']);
      const before = modelCalls;
      const { launched, outcome, job } = await runJob('j0000000000budget0000000002');
      assert.equal(outcome.status, 'stopped', `${outcome.error}\n${job?.stderr}`);
      assert.equal(outcome.error, 'Stopped at the max_usd budget: spent $1.00 of $0.25, as the run container reported');
      assert.equal(modelCalls, before + 1);
      const events = (await cp.request('GET', `/v1/runs/k8s/${launched.run!.run}/events?limit=500`)).json;
      assert.ok(!JSON.stringify(events).includes('"question"'), 'the run asked nothing');
    });
});
