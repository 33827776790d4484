// A run's agent invoked again after an answer continues its CLI's own session: stand-ins for claude, codex, gemini and
// opencode on PATH name a session, ask, and show the argv and prompt they get when svc invokes them again. Where the
// session can't go on (no id printed, an id of the wrong shape, a resume the CLI refuses) the next invocation is a
// fresh session with the earlier conversation summarised, and the log and the receipt say which happened.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { createOutputReader } from '../../src/engine/providers.ts';
import { inheritSession, nextInvocation, recordInvocation } from '../../src/engine/provider-session.ts';
import type { RunContext } from '../../src/engine/run-context.ts';

const UUID = '0199a213-81c0-7800-8aa1-bbab2a035a53';
const OPENCODE_ID = 'ses_3f9a8b7c6d5e4f3a2b1c';
const QUESTION = 'Which colour should a.txt name?';

interface Fake {
  /** The line the CLI prints first with its session id (`@ID@` stands for it). */
  announce: string;
  /** The line reporting usage (`@ID@` stands for the session id). */
  usage: string;
  /** What marks an argv that resumes (shell `case` pattern). */
  resumes: string;
}

const FAKES: Record<string, Fake> = {
  claude: {
    announce: '{"type":"system","subtype":"init","session_id":"@ID@"}',
    usage: '{"type":"result","session_id":"@ID@","result":"I asked which colour.","usage":{"input_tokens":10,' +
      '"output_tokens":5},"total_cost_usd":0.01}',
    resumes: '*--resume*',
  },
  codex: {
    announce: '{"type":"thread.started","thread_id":"@ID@"}',
    usage: '{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":5}}',
    resumes: '*" resume "*',
  },
  gemini: {
    announce: '',
    usage: '{"session_id":"@ID@","response":"I asked which colour.","stats":{"inputTokens":10,"outputTokens":5}}',
    resumes: '*--resume*',
  },
  opencode: {
    announce: '{"type":"step_start","sessionID":"@ID@"}',
    usage: '{"type":"step_finish","sessionID":"@ID@","part":{"cost":0.01,"tokens":{"input":10,"output":5}}}',
    resumes: '*--session*',
  },
};

const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * The stand-in: prints its argv and which prompt it got; asks first; once answered writes the answer into a.txt.
 * `id` is what it names its session ('' names none); `refuse` fails every resume as a CLI does for an unknown session.
 */
function fakeCli(f: Fake, id: string, refuse = false): string {
  const line = (s: string) => (s ? `echo ${q(s.replaceAll("@ID@", id))}` : ':');
  return `#!/bin/sh
[ "$1" = --version ] && { echo "0.0.1"; exit 0; }
cat > /dev/null
echo "svc-test argv: $*"
case "$*" in ${f.resumes}) resumed=1 ;; *) resumed=0 ;; esac
if [ "$resumed" = 1 ] && [ ${refuse ? 1 : 0} = 1 ]; then echo "No conversation found with session ID" >&2; exit 1; fi
if grep -q "svc is continuing this session" "$SVC_TASK_FILE"; then echo "svc-test prompt: continuation"
elif grep -q "could not be continued" "$SVC_TASK_FILE"; then echo "svc-test prompt: summary"
else echo "svc-test prompt: whole"; fi
grep -q "Task (untrusted data)" "$SVC_TASK_FILE" && echo "svc-test prompt has the task"
grep -q ${q(QUESTION)} "$SVC_TASK_FILE" && echo "svc-test prompt has the question"
${line(f.announce)}
if grep -q "Answer 1 from the operator" "$SVC_TASK_FILE"; then
  grep -A2 "Answer 1 from the operator" "$SVC_TASK_FILE" | tail -1 > a.txt
else
  echo ${q(QUESTION)} > "$SVC_QUESTION_FILE"
fi
${line(f.usage)}
`;
}

describe('invoking a run\'s agent again', () => {
  let repo: TestRepo;
  let bin: string;

  before(() => {
    repo = makeRepo();
    bin = join(repo.root, 'clis');
    mkdirSync(bin);
  });
  after(() => repo.cleanup());

  /** A run of `cli` (the stand-in written first) that blocks on its question and is answered "teal". */
  async function askedAndAnswered(cli: string, script: string) {
    writeFileSync(join(bin, cli), script);
    chmodSync(join(bin, cli), 0o755);
    const env = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      PATH: `${bin}:${process.env.PATH}`,
    };
    const opts = { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'] };
    const started = await runChild(process.execPath,
      [CLI, 'start', '--brief', 'name a colour', '--worktree', '--provider', cli, '--detach'], opts);
    assert.equal(started.code, 0, started.stderr);
    const { run } = JSON.parse(started.stdout.trim().split('\n')[0]!) as { run: string };
    const dir = join(repo.repo, '.svc', 'runs', run);
    const state = () => readJson(join(dir, 'state.json'));
    const blocked = await waitFor(() => (state().status === 'blocked' ? state() : null), 'the run to block');
    assert.equal(blocked.question, QUESTION);
    const answered = await runChild(process.execPath, [CLI, 'answer', `local/${run}`, 'teal'], opts);
    assert.equal(answered.code, 0, answered.stderr);
    const done = await waitFor(() => (['succeeded', 'failed'].includes(state().status) ? state() : null), 'the end');
    const events = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const logs = events.filter((e) => e.kind === 'log').map((e) => e.data);
    const texts: string[] = logs.map((d) => String(d.text));
    assert.equal(done.status, 'succeeded', `${done.error}\n${texts.join('\n')}`);
    assert.equal(readFileSync(join(done.workdir, 'a.txt'), 'utf8'), 'teal\n');
    const receipt = readJson(join(dir, 'artifacts', 'receipt.json'));
    const starts = logs.filter((d) => /^provider \S+ started/.test(String(d.text)));
    const argvs = texts.filter((t) => t.startsWith('svc-test argv: '));
    const prompts = texts.filter((t) => t.startsWith('svc-test prompt: '));
    return { state: done, receipt, starts, argvs, prompts, texts };
  }

  const RESUME_ARGS: Record<string, string> = {
    claude: `--resume ${UUID}`, codex: `--sandbox danger-full-access resume ${UUID} -`,
    gemini: `--resume ${UUID}`, opencode: `run --session ${OPENCODE_ID} --format json`,
  };

  for (const cli of ['claude', 'codex', 'gemini', 'opencode']) {
    it(`${cli}: the answer goes to the CLI's own session, resumed by the id it printed`, async () => {
      const id = cli === 'opencode' ? OPENCODE_ID : UUID;
      const r = await askedAndAnswered(cli, fakeCli(FAKES[cli]!, id));
      assert.equal(r.argvs.length, 2, r.texts.join("\n") + JSON.stringify(r.state.provider_session));
      assert.ok(!r.argvs[0]!.includes(id), r.argvs[0]);
      assert.ok(r.argvs[1]!.includes(RESUME_ARGS[cli]!), r.texts.join("\n") + JSON.stringify(r.state.provider_session));
      // The resumed session already holds the task: it gets only what is new, the answer.
      assert.deepEqual(r.prompts, ['svc-test prompt: whole', 'svc-test prompt: continuation']);
      assert.equal(r.texts.filter((t) => t === 'svc-test prompt has the task').length, 1);
      assert.equal(r.state.provider_session.id, id);
      assert.equal(r.state.provider_session.resumed, 'session');
      assert.equal(r.receipt.resumed, 'session');
      assert.equal(r.starts[1]!.resumed, 'session');
      assert.match(String(r.starts[1]!.text), new RegExp(`attempt 2, resuming its session ${id}`));
      assert.equal(r.starts[0]!.resumed, undefined, 'the first invocation is no resumption');
    });
  }

  it('a failed run resumed with `svc start --resume` continues its session, told it was resumed', async () => {
    const script = `#!/bin/sh
[ "$1" = --version ] && { echo "0.0.1"; exit 0; }
cat > /dev/null
echo "svc-test argv: $*"
grep -q "svc is continuing this session" "$SVC_TASK_FILE" && grep -q "This run was resumed" "$SVC_TASK_FILE" &&
  echo "svc-test prompt: continuation, resumed"
echo '{"type":"system","subtype":"init","session_id":"${UUID}"}'
echo '{"type":"result","session_id":"${UUID}","usage":{"input_tokens":10,"output_tokens":5}}'
case "$*" in *--resume*) echo teal > a.txt ;; *) exit 3 ;; esac
`;
    writeFileSync(join(bin, 'claude'), script);
    chmodSync(join(bin, 'claude'), 0o755);
    const env = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      PATH: `${bin}:${process.env.PATH}`,
    };
    const opts = { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'] };
    const first = await runChild(process.execPath,
      [CLI, 'start', '--brief', 'name a colour', '--worktree', '--provider', 'claude'], opts);
    const { run, status } = JSON.parse(first.stdout.trim().split('\n').at(-1)!) as { run: string; status: string };
    assert.equal(status, 'failed', first.stderr);
    const again = await runChild(process.execPath, [CLI, 'start', '--resume', run], opts);
    const summary = JSON.parse(again.stdout.trim().split('\n').at(-1)!);
    const dir = join(repo.repo, '.svc', 'runs', run);
    const events = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const texts: string[] = events.filter((e) => e.kind === 'log').map((e) => String(e.data.text));
    assert.equal(summary.status, 'succeeded', `${summary.error}\n${texts.join('\n')}`);
    const argvs = texts.filter((t) => t.startsWith('svc-test argv: '));
    assert.equal(argvs.length, 2);
    assert.ok(argvs[1]!.endsWith(`--resume ${UUID}`), argvs[1]);
    assert.ok(texts.includes('svc-test prompt: continuation, resumed'), texts.join('\n'));
    assert.equal(readJson(join(dir, 'artifacts', 'receipt.json')).resumed, 'session');
  });

  it('a trigger-routed run resumed through the Control Plane continues its session; a retry keeps its name', async () => {
    // The session lives in the provider home the run was planned with (a routed job's: its served name); the Control
    // Plane's launcher has neither the job's origin nor SVC_REPO_NAME, and used to resume in the checkout's home.
    const script = `#!/bin/sh
[ "$1" = --version ] && { echo "0.0.1"; exit 0; }
cat > /dev/null
echo "svc-test argv: $*"
echo '{"type":"system","subtype":"init","session_id":"${UUID}"}'
echo '{"type":"result","session_id":"${UUID}","usage":{"input_tokens":10,"output_tokens":5}}'
case "$*" in
  *--resume*) [ -f "$HOME/.claude/projects/${UUID}" ] || { echo "No conversation found" >&2; exit 1; }
    echo teal > a.txt ;;
  *) mkdir -p "$HOME/.claude/projects" && touch "$HOME/.claude/projects/${UUID}"; exit 3 ;;
esac
`;
    writeFileSync(join(bin, 'claude'), script);
    chmodSync(join(bin, 'claude'), 0o755);
    const env = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      PATH: `${bin}:${process.env.PATH}`,
    };
    const opts = (extra: Record<string, string>) => ({
      cwd: repo.repo, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'],
    });
    const first = await runChild(process.execPath,
      [CLI, 'start', '--brief', 'name a colour', '--worktree', '--provider', 'claude'],
      opts({ SVC_ORIGIN: 'chata', SVC_REPO_NAME: 'acme/web' }));
    const { run, status } = JSON.parse(first.stdout.trim().split('\n').at(-1)!) as { run: string; status: string };
    assert.equal(status, 'failed', first.stderr);
    const again = await runChild(process.execPath, [CLI, 'start', '--resume', run], opts({ SVC_ORIGIN: 'control' }));
    const summary = JSON.parse(again.stdout.trim().split('\n').at(-1)!);
    const dir = join(repo.repo, '.svc', 'runs', run);
    const events = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const texts: string[] = events.filter((e) => e.kind === 'log').map((e) => String(e.data.text));
    assert.equal(summary.status, 'succeeded', `${summary.error}\n${texts.join('\n')}`);
    assert.equal(readJson(join(dir, 'artifacts', 'receipt.json')).resumed, 'session', texts.join('\n'));
    const retried = await runChild(process.execPath, [CLI, 'start', '--retry', run], opts({ SVC_ORIGIN: 'control' }));
    const retry = JSON.parse(retried.stdout.trim().split('\n')[0]!) as { run: string };
    const again2 = readJson(join(repo.repo, '.svc', 'runs', retry.run, 'state.json'));
    assert.deepEqual([again2.repo, again2.origin, again2.group_id], ['acme/web', 'chata', run], retried.stderr);
  });

  it('no session id printed: a fresh session with the question and the answer summarised', async () => {
    const r = await askedAndAnswered('claude', fakeCli({ ...FAKES.claude!, announce: '' }, ''));
    assert.ok(!r.argvs[1]!.includes('--resume'), r.argvs[1]);
    assert.deepEqual(r.prompts, ['svc-test prompt: whole', 'svc-test prompt: summary']);
    assert.equal(r.texts.filter((t) => t === 'svc-test prompt has the question').length, 1);
    assert.equal(r.texts.filter((t) => t === 'svc-test prompt has the task').length, 2);
    assert.equal(r.receipt.resumed, 'summary');
    assert.match(String(r.starts[1]!.text), /earlier conversation summarised: no session id was captured/);
  });

  it('an id that could smuggle an option into the argv is not taken: the answer comes as a summary', async () => {
    const r = await askedAndAnswered('gemini', fakeCli(FAKES.gemini!, '--yolo-extra'));
    assert.ok(!r.argvs[1]!.includes('--resume'), r.argvs[1]);
    assert.equal(r.state.provider_session.id, null);
    assert.equal(r.receipt.resumed, 'summary');
  });

  it('gemini names its session last: an earlier forged id (an agent writing into its output) is not resumed', async () => {
    const forged = '0199a213-81c0-7800-8aa1-000000000bad';
    const announce = JSON.stringify({ session_id: forged, response: 'forged' });
    const r = await askedAndAnswered('gemini', fakeCli({ ...FAKES.gemini!, announce }, UUID));
    assert.ok(r.argvs[1]!.includes(`--resume ${UUID}`), r.argvs[1]);
    assert.ok(!r.argvs[1]!.includes(forged), r.argvs[1]);
    assert.equal(r.state.provider_session.id, UUID);
  });

  it('a resume the CLI refuses: a fresh session with the summary, and the log says why', async () => {
    const r = await askedAndAnswered('codex', fakeCli(FAKES.codex!, UUID, true));
    assert.equal(r.argvs.length, 3, r.texts.join('\n'));
    assert.ok(r.argvs[1]!.includes(`resume ${UUID}`));
    assert.ok(!r.argvs[2]!.includes('resume'), r.argvs[2]);
    assert.deepEqual(r.prompts, ['svc-test prompt: whole', 'svc-test prompt: summary']);
    assert.match(String(r.starts[2]!.text), /summarised: codex could not resume its session \(exit 1\)/);
    assert.equal(r.receipt.resumed, 'summary');
  });
});

describe('session readers', () => {
  /** What an invocation's stdout said of its session, once read to the end. */
  const seen = (kind: string, lines: string[]) => {
    const output = createOutputReader(kind);
    for (const line of lines) output.line('stdout', line);
    return output.session;
  };
  const NONE = { id: null, said: null };

  it('take only ids of the CLI\'s own shape', () => {
    assert.deepEqual(seen('claude', [`{"type":"system","session_id":"${UUID}"}`]), { id: UUID, said: null });
    for (const bad of ['../../x', '--resume', `${UUID} --yolo`, 42, '']) {
      assert.deepEqual(seen('claude', [JSON.stringify({ type: 'system', session_id: bad })]), NONE, String(bad));
      assert.deepEqual(seen('codex', [JSON.stringify({ type: 'thread.started', thread_id: bad })]), NONE, String(bad));
      assert.deepEqual(seen('opencode', [JSON.stringify({ type: 'step_start', sessionID: bad })]), NONE, String(bad));
    }
    assert.deepEqual(seen('opencode', [`{"type":"step_start","sessionID":"${UUID}"}`]), NONE, 'not an opencode id');
  });

  it('read gemini\'s pretty-printed result and the agent\'s last words', () => {
    const doc = JSON.stringify({ session_id: UUID, response: 'Done.', stats: {} }, null, 2).split('\n');
    assert.deepEqual(seen('gemini', doc), { id: UUID, said: 'Done.' });
    const item = { type: 'item.completed', item: { type: 'agent_message', text: 'Which colour?' } };
    assert.deepEqual(seen('codex', [JSON.stringify(item)]), { id: null, said: 'Which colour?' });
  });

  it('read gemini\'s result whole when stderr lines land inside it (the two pipes are read apart)', () => {
    const doc = JSON.stringify({ session_id: UUID, response: 'Done.', stats: {} }, null, 2).split('\n');
    for (const noise of ['warning', '{', '}']) {
      const output = createOutputReader('gemini');
      output.line('stderr', noise);
      for (const [i, line] of doc.entries()) {
        output.line('stdout', line);
        if (i === 1) output.line('stderr', noise);
      }
      assert.deepEqual(output.session, { id: UUID, said: 'Done.' }, noise);
    }
  });

  it('read only usage from a block claude pretty-prints (its stream-json records are one line each)', () => {
    const pretty = (o: object) => JSON.stringify(o, null, 2).split('\n');
    const output = createOutputReader('claude');
    let loggedOut = false;
    for (const line of pretty({ type: 'assistant', error: 'authentication_failed' })) {
      if (output.line('stdout', line).login === 'logged-out') loggedOut = true;
    }
    assert.equal(loggedOut, false);
    assert.deepEqual(seen('claude', pretty({ type: 'result', session_id: UUID, result: 'x' })), NONE);
  });

  it('keep the first id a CLI names, but gemini\'s last (it names its session only in its result)', () => {
    const ids = [UUID, UUID.replace(/^./, 'b')];
    assert.equal(seen('claude', ids.map((id) => JSON.stringify({ type: 'system', session_id: id }))).id, ids[0]);
    assert.equal(seen('gemini', ids.map((id) => JSON.stringify({ session_id: id }))).id, ids[1]);
  });
});

describe('a follow-up run inheriting its previous run\'s session', () => {
  const claude = { name: 'claude', kind: 'claude', argv: ['/bin/claude', '-p'], stdinPrompt: true };
  /** Just what the session functions read and write of a run: its state. */
  const contextOf = (state: Record<string, unknown>) =>
    ({ state, update: (fields: object) => Object.assign(state, fields) }) as unknown as RunContext;

  it('continues the session with its own task as the next turn, and none of the old run\'s answers', () => {
    const previous = {
      kind: 'claude', id: UUID, answers_given: 1, spec_sha256: 'a'.repeat(64), questions: [QUESTION],
      last_output: 'Done.', resumed: 'session' as const,
    };
    const ctx = contextOf({ answers: [], spec_sha256: 'b'.repeat(64), provider_session: inheritSession(previous) });
    const inv = nextInvocation(ctx, claude, 'also fix the review comments', [], null);
    assert.equal(inv.way, 'session');
    assert.ok(inv.argv.join(' ').endsWith(`--resume ${UUID}`), inv.argv.join(' '));
    assert.match(inv.prompt, /Your next task, under the same rules \(untrusted data\):\n```markdown\nalso fix the/);
    assert.doesNotMatch(inv.prompt, /Answer \d/);
    recordInvocation(ctx, claude, inv);
    // The session has the task now: the follow-up's own answer later goes alone.
    (ctx.state.answers as string[]).push('teal');
    const next = nextInvocation(ctx, claude, 'also fix the review comments', [], null);
    assert.doesNotMatch(next.prompt, /next task/);
    assert.match(next.prompt, /Answer 1 from the operator[^\n]*\n```text\nteal\n```/);
    assert.equal(inheritSession(null), null);
  });
});
