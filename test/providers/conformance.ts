// The checks every provider's end-to-end test makes the same way: what the CLI sent the model (the task fenced as
// data, none of svc's secrets), a blocked-then-answered run, and a stop during a long tool call that leaves nothing.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { processAlive, processesMentioning } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { ASKED, CONTINUED, longScript, type RecordedRequest, type Script } from './model-script.ts';
import { BROKEN, FIXED, QUESTION, SVC_SECRETS, askForTheWord, summaryOf, type CliRepo } from './cli-run.ts';

interface Scripted {
  requests: RecordedRequest[];
  setScript(script: Script): void;
}

/** Every recorded request, headers and body, as one text. */
export function sentText(server: Scripted): string {
  return server.requests.map((r) => `${r.method} ${r.path}\n${JSON.stringify(r.headers)}\n${r.text}`).join('\n');
}

/**
 * The exported issue's title sits inside the fence that follows the prompt's "Task (untrusted data):" heading, in
 * the JSON the CLI sent (`\n` escaped); a CLI that read the task file may number its lines ("1: ").
 */
export function assertTaskFenced(server: Scripted): void {
  const fenced = /Task \(untrusted data\):\\n(\d+: )?```markdown\\n[^`]*Tool list_organizations is already registered/;
  assert.match(sentText(server), fenced);
}

export function assertNoSecretSent(server: Scripted): void {
  const sent = sentText(server);
  assert.ok(server.requests.length > 0, 'the model server saw no request');
  for (const [name, value] of Object.entries(SVC_SECRETS)) assert.ok(!sent.includes(value), `the model saw ${name}`);
}

/** Every file under `dir`, read as text (a CLI's config and login folders are small). */
function filesUnder(dir: string): Array<{ path: string; text: string }> {
  const out: Array<{ path: string; text: string }> = [];
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out.push({ path, text: readFileSync(path, 'latin1') });
  }
  return out;
}

/**
 * The model key svc holds never reached the agent (DESIGN §7a, the gate): the model server saw the real key (the gate
 * added it), while nothing the CLI kept in its HOME holds the key or its tail, only what it was given: the placeholder.
 */
export function assertKeyOnlyAtTheGate(server: Scripted, home: string, key: string, header: string): void {
  assert.ok(server.requests.length > 0, 'the model server saw no request');
  for (const r of server.requests) {
    const value = String(r.headers[header] ?? '');
    assert.ok(value === key || value === `Bearer ${key}`, `the model server got ${header}: ${value}`);
  }
  for (const { path, text } of filesUnder(home)) {
    assert.ok(!text.includes(key.slice(-12)), `${path} holds the real key`);
  }
}

/**
 * The CLI ran through its repository's provider home (src/spawn/provider-home.ts): its session state is kept under
 * ~/.svc/homes/<cli>/<key>/state/ (a file there matches `kept`), its invocations' fresh folders are gone, and the
 * user's own folders of the CLI (`real`, relative to HOME) hold only `template`, the files the test put there.
 */
export function assertSessionKeptPerRepository(
  home: string, cli: string, kept: RegExp, real: string[], template: string[],
): void {
  const homes = join(home, '.svc', 'homes', cli);
  const keys = readdirSync(homes);
  assert.equal(keys.length, 1, `one home for the one repository: ${keys.join(' ')}`);
  const state = join(homes, keys[0]!, 'state');
  const files = filesUnder(state).map((f) => f.path.slice(state.length + 1));
  assert.ok(files.some((f) => kept.test(f)), `no ${kept} among the kept files:\n${files.join('\n')}`);
  assert.deepEqual(existsSync(join(homes, keys[0]!, 'laid')) ? readdirSync(join(homes, keys[0]!, 'laid')) : [], []);
  const left = real.flatMap((dir) => (existsSync(join(home, dir)) ? filesUnder(join(home, dir)) : []))
    .map((f) => f.path.slice(home.length + 1));
  assert.deepEqual(left.sort(), [...template].sort(), 'nothing of the run landed in the user\'s own folders');
}

export interface FixRun {
  run: string;
  state: any;
  /** The text of every `log` event of the run: the CLI's own output among svc's lines. */
  logs: string[];
}

/**
 * `svc start <export.json> --pr` with the fix script: the run succeeds with verdict `verified` and a PR, the CLI's
 * edit is in the run's diff and not in the main checkout, and the receipt verifies.
 */
export async function verifiedFixRun(repo: CliRepo, provider: string): Promise<FixRun> {
  const res = await repo.svc(['start', repo.exportFile, '--pr', '--provider', provider]);
  const summary = summaryOf(res);
  const logs = repo.events(summary.run).filter((e) => e.kind === 'log').map((e) => String(e.data.text));
  assert.equal(summary.status, 'succeeded', `${summary.error}\n${res.stderr}\n${logs.join('\n').slice(0, 4000)}`);
  assert.equal(summary.verdict, 'verified');
  assert.match(summary.pr_url ?? '', /pull\/\d+$/);
  const artifacts = join(repo.repo, '.svc', 'runs', summary.run, 'artifacts');
  assert.match(readFileSync(join(artifacts, 'diff.patch'), 'utf8'), new RegExp(`-${BROKEN}\\n\\+${FIXED}`));
  assert.equal(readFileSync(join(repo.repo, 'a.txt'), 'utf8'), `${BROKEN}\n`, 'the main checkout is untouched');
  const verified = await repo.svc(['receipt', 'verify', join(artifacts, 'receipt.json')]);
  assert.equal(verified.code, 0, verified.stderr);
  return { run: summary.run, state: repo.state(summary.run), logs };
}

/**
 * The CLI writes the question to $SVC_QUESTION_FILE and exits; `svc answer` re-invokes it in its own session, and the
 * run finishes. The model server sees the session resumed: the first request after the answer carries the earlier
 * turns (the task, the asking tool call and the model's reply) before svc's continuation with the answer.
 */
export async function blockedThenAnswered(repo: CliRepo, server: Scripted, provider: string): Promise<void> {
  server.setScript(askForTheWord());
  const run = await repo.startDetached('make the test pass', provider);
  const blocked = await repo.waitStatus(run, ['blocked']);
  assert.equal(blocked.question, QUESTION);
  const before = server.requests.length;
  const answered = await repo.svc(['answer', `local/${run}`, FIXED]);
  assert.equal(answered.code, 0, answered.stderr);
  const done = await repo.waitStatus(run, ['succeeded', 'failed']);
  const logs = repo.events(run).filter((e) => e.kind === 'log').map((e) => String(e.data.text).slice(0, 300));
  assert.equal(done.status, 'succeeded', `${done.error}\n${logs.join('\n')}`);
  assert.equal(done.verdict, 'verified');
  assert.equal(readFileSync(join(done.workdir, 'a.txt'), 'utf8'), `${FIXED}\n`);
  const started = new RegExp(`provider ${provider} started`);
  assert.equal(logs.filter((t) => started.test(t)).length, 2, 'the answer re-invoked the CLI once');
  const resumed = server.requests.slice(before).find((r) => r.text.includes(CONTINUED));
  assert.ok(resumed, 'no request after the answer carried svc\'s continuation');
  for (const earlier of ['make the test pass', QUESTION, ASKED]) {
    assert.ok(resumed.text.includes(earlier), `the resumed conversation lacks the earlier "${earlier}"`);
  }
  assert.ok(!resumed.text.includes('could not be continued'), 'a summary, not the session');
  assert.equal(done.provider_session.resumed, 'session');
  const receipt = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json'), 'utf8'));
  assert.equal(receipt.resumed, 'session');
}

/**
 * The session's files are gone while the run waits (its provider home's kept state removed): the CLI refuses to resume,
 * and svc invokes it once more in a fresh session whose prompt summarises the earlier conversation; the run finishes,
 * and its log and receipt say it fell back to the summary.
 */
export async function sessionGoneThenSummary(repo: CliRepo, server: Scripted, provider: string): Promise<void> {
  server.setScript(askForTheWord());
  const run = await repo.startDetached('make the test pass', provider);
  assert.equal((await repo.waitStatus(run, ['blocked'])).question, QUESTION);
  // Gone between invocations: once the CLI has exited (a CLI whose folder vanishes under it may hang).
  await waitFor(() => repo.state(run).child === null, 'the CLI to exit after asking', 300_000);
  const homes = join(repo.home, '.svc', 'homes', provider);
  for (const key of readdirSync(homes)) rmSync(join(homes, key, 'state'), { recursive: true, force: true });
  const before = server.requests.length;
  const answered = await repo.svc(['answer', `local/${run}`, FIXED]);
  assert.equal(answered.code, 0, answered.stderr);
  const done = await repo.waitStatus(run, ['succeeded', 'failed']);
  const logs = repo.events(run).filter((e) => e.kind === 'log').map((e) => String(e.data.text).slice(0, 300));
  assert.equal(done.status, 'succeeded', `${done.error}\n${logs.join('\n')}`);
  assert.equal(readFileSync(join(done.workdir, 'a.txt'), 'utf8'), `${FIXED}\n`);
  const starts = logs.filter((t) => t.startsWith(`provider ${provider} started`));
  assert.equal(starts.length, 3, starts.join('\n'));
  assert.match(starts[1]!, /resuming its session/);
  assert.match(starts[2]!, new RegExp(`summarised: ${provider} could not resume its session`));
  const fresh = server.requests.slice(before).find((r) => r.text.includes('could not be continued'));
  assert.ok(fresh, 'no request after the answer carried the summary');
  assert.ok(fresh.text.includes(QUESTION) && !fresh.text.includes(CONTINUED), 'the summary names the question');
  assert.equal(done.provider_session.resumed, 'summary');
  const receipt = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json'), 'utf8'));
  assert.equal(receipt.resumed, 'summary');
}

/**
 * The CLI's shell tool runs a long command, inside svc's sandbox; `svc start --stop` ends the run, the CLI, the shell
 * and its sleep.
 */
export async function stopLeavesNothing(repo: CliRepo, server: Scripted, provider: string): Promise<void> {
  // Found by a marker in their command lines: inside svc's sandbox the shell's pids are its own namespace's.
  const marker = `svc-long-${provider}-${process.pid}-${Date.now()}`;
  server.setScript(longScript(marker));
  const run = await repo.startDetached('run the long job', provider);
  const tools = await waitFor(() => {
    const found = processesMentioning(marker);
    return found.length >= 2 ? found : null;
  }, 'the long command to start', 300_000);
  // The CLI's commands run inside svc's sandbox: a PID namespace of their own, not the one svc and this test share.
  const ours = readlinkSync('/proc/self/ns/pid');
  for (const pid of tools) assert.notEqual(readlinkSync(`/proc/${pid}/ns/pid`), ours, `pid ${pid} is not sandboxed`);
  const cli = repo.state(run).child?.pid;
  assert.ok(Number.isInteger(cli), 'the run names its provider process');
  const stop = await repo.svc(['start', '--stop', run]);
  assert.equal(stop.code, 0, stop.stderr);
  assert.equal((await repo.waitStatus(run, ['stopped'])).status, 'stopped');
  const gone = () => !processAlive(cli as number) && processesMentioning(marker).length === 0;
  await waitFor(() => gone() || null, 'the CLI, its shell and the sleep to be gone');
}
