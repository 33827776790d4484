// The real gemini CLI (@google/gemini-cli) driven by `svc start` against a scripted Gemini API on 127.0.0.1.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startGeminiModelServer, type ScriptedServer } from './gemini-model-server.ts';
import { longScript } from './model-script.ts';
import { skipUnlessInstalled, requireProviderCli, makeCliRepo, summaryOf, type CliRepo } from './cli-run.ts';
import { fixTheTest, askForTheWord } from './cli-run.ts';
import { BROKEN, FIXED, SUMMARY, QUESTION } from './cli-run.ts';
import { processesMentioning } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';

const SECRETS = ['gh-secret-token-p2', 'svc-secret-control-p2'];
const skip = skipUnlessInstalled('gemini');

describe('gemini CLI end to end', { skip }, () => {
  let server: ScriptedServer;
  let repo: CliRepo;

  before(async () => {
    server = await startGeminiModelServer(fixTheTest());
    const env = { GEMINI_API_KEY: 'scripted-gemini-key', GOOGLE_GEMINI_BASE_URL: server.url };
    repo = await makeCliRepo(requireProviderCli('gemini'), { ...env, SVC_CONTROL_TOKEN: SECRETS[1] });
    // A user who chose "Use Gemini API key" (what gemini's own auth dialog saves). With GOOGLE_GEMINI_BASE_URL set and
    // no choice saved, gemini 0.61 picks its "gateway" auth type and then refuses it headless.
    mkdirSync(join(repo.home, '.gemini'), { recursive: true });
    // Usage statistics and update checks off: nothing but the scripted server is contacted.
    const settings = {
      security: { auth: { selectedType: 'gemini-api-key' } },
      privacy: { usageStatisticsEnabled: false },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    };
    writeFileSync(join(repo.home, '.gemini', 'settings.json'), JSON.stringify(settings));
  });
  after(async () => {
    await repo?.close();
    await server?.close();
  });

  it('fixes the failing test with its own tools: verified PR, receipt verifies, tokens as reported', async () => {
    const res = await repo.svc(['start', repo.exportFile, '--pr', '--provider', 'gemini']);
    const summary = summaryOf(res);
    assert.equal(summary.status, 'succeeded', `${summary.error}\n${res.stderr}`);
    assert.equal(summary.verdict, 'verified');
    assert.match(summary.pr_url ?? '', /pull\/\d+$/);
    const state = repo.state(summary.run);
    const artifacts = join(repo.repo, '.svc', 'runs', summary.run, 'artifacts');
    assert.match(readFileSync(join(artifacts, 'diff.patch'), 'utf8'), new RegExp(`-${BROKEN}\\n\\+${FIXED}`));
    assert.equal(readFileSync(join(repo.repo, 'a.txt'), 'utf8'), `${BROKEN}\n`, 'the main checkout is untouched');
    // The edit came through gemini's tools, in the worktree: read_file, replace, then the test through its shell.
    const contents = server.requests.flatMap((r) => (r.body as any)?.contents ?? []);
    const responses = contents.flatMap((c: any) => c.parts ?? []);
    const tools = responses.filter((p: any) => p.functionResponse).map((p: any) => p.functionResponse.name);
    assert.deepEqual(tools, ['read_file', 'read_file', 'replace', 'read_file', 'replace', 'run_shell_command']);
    // Tokens on the run are what the server reported through the CLI (gemini prints no price).
    const figures = { in: state.tokens_in, out: state.tokens_out, usd: state.cost_usd };
    assert.deepEqual(figures, { in: server.usage.input, out: server.usage.output, usd: null });
    const verified = await repo.svc(['receipt', 'verify', join(artifacts, 'receipt.json')]);
    assert.equal(verified.code, 0, verified.stderr);
    // The run's log shows the CLI's own output (its JSON result with the model's summary).
    const logs = repo.events(summary.run).filter((e) => e.kind === 'log').map((e) => String(e.data.text));
    assert.ok(logs.some((t) => t.includes(SUMMARY)), logs.slice(0, 20).join('\n'));
    // What the CLI sent: the task fenced as untrusted data, and none of svc's secrets.
    const sent = server.requests.map((r) => `${JSON.stringify(r.headers)}\n${r.text}`).join('\n');
    assert.match(sent, /Task \(untrusted data\):\\n```markdown\\n[^`]*Tool list_organizations is already registered/);
    for (const secret of SECRETS) assert.ok(!sent.includes(secret), `the model server saw ${secret}`);
    assert.ok(server.requests.every((r) => r.headers['x-goog-api-key'] === 'scripted-gemini-key'));
  });

  it('asks through $SVC_QUESTION_FILE, blocks, and finishes once svc answer re-invokes it', async () => {
    server.setScript(askForTheWord());
    const run = await repo.startDetached('make the test pass', 'gemini');
    const blocked = await repo.waitStatus(run, ['blocked']);
    assert.equal(blocked.question, QUESTION);
    const answered = await repo.svc(['answer', `local/${run}`, FIXED]);
    assert.equal(answered.code, 0, answered.stderr);
    const done = await repo.waitStatus(run, ['succeeded', 'failed']);
    const logs = repo.events(run).filter((e) => e.kind === 'log').map((e) => String(e.data.text).slice(0, 300));
    assert.equal(done.status, 'succeeded', `${done.error}\n${logs.join('\n')}`);
    assert.equal(done.verdict, 'verified');
    assert.equal(readFileSync(join(done.workdir, 'a.txt'), 'utf8'), `${FIXED}\n`);
    assert.equal(logs.filter((t) => /provider gemini started/.test(t)).length, 2);
  });

  it('stop during a long shell command leaves nothing running', async () => {
    const marker = `svc-long-gemini-${process.pid}`;
    server.setScript(longScript(marker));
    const run = await repo.startDetached('run the long job', 'gemini');
    await waitFor(() => processesMentioning(marker).length >= 2 || null, 'the long command to start', 120_000);
    const stop = await repo.svc(['start', '--stop', run]);
    assert.equal(stop.code, 0, stop.stderr);
    assert.equal((await repo.waitStatus(run, ['stopped'])).status, 'stopped');
    await waitFor(() => processesMentioning(marker).length === 0 || null, 'the shell and its sleep to be gone');
  });
});
