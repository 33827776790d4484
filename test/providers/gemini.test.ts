// The real gemini CLI (@google/gemini-cli) driven by `svc start` against a scripted Gemini API on 127.0.0.1.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startGeminiModelServer, type ScriptedServer } from './gemini-model-server.ts';
import { fixScript, askScript, longScript } from './model-script.ts';
import { providerCliDir, makeCliRepo, summaryOf, BROKEN, FIXED, TEST_COMMAND, type CliRepo } from './cli-run.ts';
import { processAlive } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';

const cliDir = providerCliDir('gemini');
const SECRETS = ['gh-secret-token-p2', 'svc-secret-control-p2'];

describe('gemini CLI end to end', { skip: cliDir ? false : 'gemini is not installed (npm run test:providers installs it)' }, () => {
  let server: ScriptedServer;
  let repo: CliRepo;

  before(async () => {
    server = await startGeminiModelServer(fixScript({ file: 'a.txt', old: BROKEN, new: FIXED, test: TEST_COMMAND, summary: 'Fixed a.txt; the test passes.' }));
    repo = await makeCliRepo(cliDir!, { GEMINI_API_KEY: 'scripted-gemini-key', GOOGLE_GEMINI_BASE_URL: server.url, SVC_CONTROL_TOKEN: SECRETS[1] });
    // A user who chose "Use Gemini API key" (what gemini's own auth dialog saves). With GOOGLE_GEMINI_BASE_URL set and
    // no choice saved, gemini 0.61 picks its "gateway" auth type and then refuses it headless.
    mkdirSync(join(repo.home, '.gemini'), { recursive: true });
    writeFileSync(join(repo.home, '.gemini', 'settings.json'), JSON.stringify({ security: { auth: { selectedType: 'gemini-api-key' } } }));
  });
  after(async () => {
    await repo?.close();
    await server?.close();
  });

  it('fixes the failing test with its own tools: verified, PR with a receipt that verifies, tokens as the server reported', async () => {
    const res = await repo.svc(['start', repo.exportFile, '--pr', '--provider', 'gemini']);
    const summary = summaryOf(res);
    assert.equal(summary.status, 'succeeded', `${summary.error}\n${res.stderr}`);
    assert.equal(summary.verdict, 'verified');
    assert.match(summary.pr_url ?? '', /pull\/\d+$/);
    const state = repo.state(summary.run);
    const diff = readFileSync(join(repo.repo, '.svc', 'runs', summary.run, 'artifacts', 'diff.patch'), 'utf8');
    assert.match(diff, new RegExp(`-${BROKEN}\\n\\+${FIXED}`));
    assert.equal(readFileSync(join(repo.repo, 'a.txt'), 'utf8'), `${BROKEN}\n`, 'the main checkout is untouched');
    // The edit came through gemini's tools, in the worktree: read_file, replace, then the test through its shell.
    const calls = server.requests.flatMap((r) => JSON.stringify(r.body).match(/"functionResponse":\{"id":"[^"]*","name":"[a-z_]+"|"functionResponse":\{"name":"[a-z_]+"/g) ?? []);
    assert.ok(calls.some((c) => c.includes('"replace"')), calls.join(' '));
    assert.ok(calls.some((c) => c.includes('"run_shell_command"')), calls.join(' '));
    // Tokens on the run are what the server reported through the CLI (gemini prints no price).
    assert.deepEqual({ in: state.tokens_in, out: state.tokens_out, usd: state.cost_usd }, { in: server.usage.input, out: server.usage.output, usd: null });
    const receipt = join(repo.repo, '.svc', 'runs', summary.run, 'artifacts', 'receipt.json');
    const verified = await repo.svc(['receipt', 'verify', receipt]);
    assert.equal(verified.code, 0, verified.stderr);
    // The run's log shows the CLI's own output (its JSON result with the model's summary).
    const logs = repo.events(summary.run).filter((e) => e.kind === 'log').map((e) => String(e.data.text));
    assert.ok(logs.some((t) => t.includes('Fixed a.txt; the test passes.')), logs.slice(0, 20).join('\n'));
    // What the CLI sent: the task fenced as untrusted data, and none of svc's secrets.
    const sent = server.requests.map((r) => `${JSON.stringify(r.headers)}\n${r.text}`).join('\n');
    assert.match(sent, /Task \(untrusted data\):\\n```markdown\\n[^`]*Tool list_organizations is already registered/);
    for (const secret of SECRETS) assert.ok(!sent.includes(secret), `the model server saw ${secret}`);
    assert.ok(server.requests.every((r) => r.headers['x-goog-api-key'] === 'scripted-gemini-key'));
  });

  it('asks through $SVC_QUESTION_FILE, blocks, and finishes once svc answer re-invokes it with the answer', async () => {
    server.setScript(askScript({ question: 'Which word should a.txt hold?', file: 'a.txt', old: BROKEN, test: TEST_COMMAND }));
    const start = await repo.svc(['start', '--brief', 'make the test pass', '--detach', '--worktree', '--provider', 'gemini']);
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
    const attempts = repo.events(run).filter((e) => e.kind === 'log' && /provider gemini started/.test(e.data.text));
    assert.equal(attempts.length, 2);
  });

  it('stop during a long shell command leaves nothing running', async () => {
    const pidFile = join(repo.root, 'gemini-long.pids');
    server.setScript(longScript(pidFile));
    const start = await repo.svc(['start', '--brief', 'run the long job', '--detach', '--worktree', '--provider', 'gemini']);
    assert.equal(start.code, 0, start.stderr);
    const { run } = JSON.parse(start.stdout.trim());
    const pids = await waitFor(() => {
      const lines = existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim().split('\n') : [];
      return lines.length === 2 ? lines.map(Number) : null;
    }, 'the long command to start', 120_000);
    const provider = repo.state(run).pid;
    const stop = await repo.svc(['start', '--stop', run]);
    assert.equal(stop.code, 0, stop.stderr);
    const stopped = await waitFor(() => (repo.state(run).status === 'stopped' ? repo.state(run) : null), 'the run to stop');
    assert.equal(stopped.status, 'stopped');
    await waitFor(() => pids.every((p) => !processAlive(p)) || null, 'the shell and its sleep to be gone');
    if (typeof provider === 'number') await waitFor(() => !processAlive(provider) || null, 'the worker to be gone');
  });
});
