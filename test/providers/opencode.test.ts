// The real opencode CLI (opencode-ai) driven by `svc start` against a scripted OpenAI-compatible chat completions API
// on 127.0.0.1, configured as a custom provider in the user's opencode.json.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startChatCompletionsServer, type ChatServer } from './chat-completions-server.ts';
import { fixScript, askScript, longScript } from './model-script.ts';
import { providerCliDir, makeCliRepo, summaryOf, BROKEN, FIXED, TEST_COMMAND, type CliRepo } from './cli-run.ts';
import { processAlive } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';

const cliDir = providerCliDir('opencode');
const SECRETS = ['gh-secret-token-p2', 'svc-secret-control-p2'];
/** USD per million tokens, as the model entry in opencode.json prices it; opencode reports cost from these. */
const PRICE = { input: 1, output: 2 };

describe('opencode CLI end to end', { skip: cliDir ? false : 'opencode is not installed (npm run test:providers installs it)' }, () => {
  let server: ChatServer;
  let repo: CliRepo;

  before(async () => {
    server = await startChatCompletionsServer(fixScript({ file: 'a.txt', old: BROKEN, new: FIXED, test: TEST_COMMAND, summary: 'Fixed a.txt; the test passes.' }));
    repo = await makeCliRepo(cliDir!, { SVC_CONTROL_TOKEN: SECRETS[1] });
    const config = {
      provider: {
        scripted: {
          npm: '@ai-sdk/openai-compatible',
          name: 'Scripted',
          options: { baseURL: `${server.url}/v1`, apiKey: 'scripted-opencode-key' },
          models: { m1: { name: 'Scripted model', cost: PRICE } },
        },
      },
      model: 'scripted/m1',
      autoupdate: false,
      share: 'disabled',
    };
    mkdirSync(join(repo.home, '.config', 'opencode'), { recursive: true });
    writeFileSync(join(repo.home, '.config', 'opencode', 'opencode.json'), JSON.stringify(config));
  });
  after(async () => {
    await repo?.close();
    await server?.close();
  });

  it('fixes the failing test with its own tools: verified, PR with a receipt that verifies, tokens and cost as reported', async () => {
    const res = await repo.svc(['start', repo.exportFile, '--pr', '--provider', 'opencode']);
    const summary = summaryOf(res);
    const logs = () => repo.events(summary.run).filter((e) => e.kind === 'log').map((e) => String(e.data.text));
    assert.equal(summary.status, 'succeeded', `${summary.error}\n${res.stderr}\n${logs().join('\n').slice(0, 4000)}`);
    assert.equal(summary.verdict, 'verified');
    assert.match(summary.pr_url ?? '', /pull\/\d+$/);
    const state = repo.state(summary.run);
    const diff = readFileSync(join(repo.repo, '.svc', 'runs', summary.run, 'artifacts', 'diff.patch'), 'utf8');
    assert.match(diff, new RegExp(`-${BROKEN}\\n\\+${FIXED}`));
    // opencode ran its tools in the worktree (its edit tool changed the worktree's a.txt, not the main checkout's).
    assert.equal(readFileSync(join(repo.repo, 'a.txt'), 'utf8'), `${BROKEN}\n`);
    const toolResults = server.requests.flatMap((r) => ((r.body as any)?.messages ?? []).filter((m: any) => m.role === 'tool'));
    assert.ok(toolResults.some((m: any) => /Edit applied/.test(JSON.stringify(m.content))), JSON.stringify(toolResults).slice(0, 2000));
    // Tokens are the agent turns' usage (opencode does not count its session-title request); cost is priced by opencode.
    assert.deepEqual({ in: state.tokens_in, out: state.tokens_out }, { in: server.agentUsage.input, out: server.agentUsage.output });
    const cost = (server.agentUsage.input * PRICE.input + server.agentUsage.output * PRICE.output) / 1e6;
    assert.ok(Math.abs(state.cost_usd - cost) < 1e-12, `${state.cost_usd} vs ${cost}`);
    const receipt = join(repo.repo, '.svc', 'runs', summary.run, 'artifacts', 'receipt.json');
    const verified = await repo.svc(['receipt', 'verify', receipt]);
    assert.equal(verified.code, 0, verified.stderr);
    assert.ok(logs().some((t) => t.includes('"type":"step_finish"')) && logs().some((t) => t.includes('Fixed a.txt; the test passes.')));
    // What the CLI sent: the task fenced as untrusted data (in the attached file opencode read), and none of svc's secrets.
    const sent = server.requests.map((r) => `${JSON.stringify(r.headers)}\n${r.text}`).join('\n');
    assert.match(sent, /Task \(untrusted data\):\\n(\d+: )?```markdown\\n[^`]*Tool list_organizations is already registered/);
    for (const secret of SECRETS) assert.ok(!sent.includes(secret), `the model server saw ${secret}`);
    assert.ok(server.requests.every((r) => r.headers.authorization === 'Bearer scripted-opencode-key'));
  });

  it('asks through $SVC_QUESTION_FILE, blocks, and finishes once svc answer re-invokes it with the answer', async () => {
    server.setScript(askScript({ question: 'Which word should a.txt hold?', file: 'a.txt', old: BROKEN, test: TEST_COMMAND }));
    const start = await repo.svc(['start', '--brief', 'make the test pass', '--detach', '--worktree', '--provider', 'opencode']);
    assert.equal(start.code, 0, start.stderr);
    const { run } = JSON.parse(start.stdout.trim());
    const blocked = await waitFor(() => (repo.state(run).status === 'blocked' ? repo.state(run) : null), 'the run to block', 120_000);
    assert.equal(blocked.question, 'Which word should a.txt hold?');
    const answered = await repo.svc(['answer', `local/${run}`, FIXED]);
    assert.equal(answered.code, 0, answered.stderr);
    const done = await waitFor(() => (['succeeded', 'failed'].includes(repo.state(run).status) ? repo.state(run) : null), 'the answered run to finish', 120_000);
    const logs = repo.events(run).filter((e) => e.kind === 'log').map((e) => String(e.data.text).slice(0, 300));
    assert.equal(done.status, 'succeeded', `${done.error}\n${logs.join('\n')}`);
    assert.equal(done.verdict, 'verified');
    assert.equal(readFileSync(join(done.workdir, 'a.txt'), 'utf8'), `${FIXED}\n`);
    assert.equal(logs.filter((t) => /provider opencode started/.test(t)).length, 2);
  });

  it('stop during a long shell command leaves nothing running', async () => {
    const pidFile = join(repo.root, 'opencode-long.pids');
    server.setScript(longScript(pidFile));
    const start = await repo.svc(['start', '--brief', 'run the long job', '--detach', '--worktree', '--provider', 'opencode']);
    assert.equal(start.code, 0, start.stderr);
    const { run } = JSON.parse(start.stdout.trim());
    const pids = await waitFor(() => {
      const lines = existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim().split('\n') : [];
      return lines.length === 2 ? lines.map(Number) : null;
    }, 'the long command to start', 120_000);
    const stop = await repo.svc(['start', '--stop', run]);
    assert.equal(stop.code, 0, stop.stderr);
    const stopped = await waitFor(() => (repo.state(run).status === 'stopped' ? repo.state(run) : null), 'the run to stop');
    assert.equal(stopped.status, 'stopped');
    await waitFor(() => pids.every((p) => !processAlive(p)) || null, 'the shell and its sleep to be gone');
  });
});
