// A run's egress record spans every session of the run (docs/engine.md "The agent sandbox"): after `svc start
// --resume` and `--verify`, the receipt's network section and egress.jsonl still hold what the earlier sessions' gates
// saw, so an agent cannot probe the network, fail on purpose and have a resume sign a clean section. The sha256 in
// state.json finds an egress.jsonl edited alone (not one rewritten together with state.json); what is left out is a
// gap in the receipt. Black-box: real `svc start` runs in bwrap behind the gate, a loopback stand-in for the model API.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { startMeteredModel, type MeteredModel } from '../helpers/metered-model.ts';

// First invocation: one model call and one refused connection, then it fails. Resumed: one more refused (and a model
// call when the test left again.txt), an edit, 0.
const PROBE = `#!/bin/sh
cat > /dev/null
model() {
  curl -s -o /dev/null --max-time 20 "$ANTHROPIC_BASE_URL/v1/messages" -H 'content-type: application/json' \\
    -d '{"model":"scripted-model"}'
}
if [ -f second.txt ]; then
  if [ -f again.txt ]; then model; fi
  curl -s -o /dev/null --max-time 5 http://second.example/ || true; echo x >> a.txt; exit 0
fi
model
curl -s -o /dev/null --max-time 5 http://not-allowed.example/ || true
touch second.txt
exit 1
`;

/** The check tries a host of its own, so each session that runs it (the resume, each verify) adds one refusal. */
const CHECK = ['sh', '-c', 'curl -s -o /dev/null --max-time 5 http://third.example/ || true'];

interface Network {
  confined: boolean;
  connections: number;
  denied: number;
  hosts: Array<{ host: string; connections: number }>;
  denials: Array<{ host: string; count: number }>;
}

describe('the egress record of a resumed or verified run', { skip: !bwrapWorks && 'needs bubblewrap' }, () => {
  let model: MeteredModel;
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  before(async () => {
    model = await startMeteredModel();
    repo = makeRepo({ providers: { p: PROBE }, policy: { checks: [{ name: 'probe', run: CHECK, required: false }] } });
    const api = `http://127.0.0.1:${(model.server.address() as AddressInfo).port}`;
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      ANTHROPIC_API_KEY: 'sk-ant-real', ANTHROPIC_BASE_URL: api };
    delete env.SVC_SANDBOX;
  });
  after(() => {
    model.server.closeAllConnections();
    model.server.close();
    repo.cleanup();
  });

  const svc = (args: string[]) => runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env });
  const network = (dir: string): Network => readJson(join(dir, 'artifacts', 'receipt.json')).network as Network;
  const egressLines = (dir: string): string[] =>
    readFileSync(join(dir, 'artifacts', 'egress.jsonl'), 'utf8').split('\n').filter((line) => line !== '');
  const refused = (n: Network) => n.denials.map((d) => `${d.host} ${d.count}`).sort();
  const receipt = (dir: string): { verdict: string; gaps: string[] } =>
    readJson(join(dir, 'artifacts', 'receipt.json'));
  const events = (dir: string) => readFileSync(join(dir, 'events.jsonl'), 'utf8').split('\n').filter((line) => line)
    .map((line) => JSON.parse(line) as { kind: string; data: { text?: string } });
  const notes = (dir: string, text: string) =>
    events(dir).filter((e) => e.kind === 'log' && e.data.text?.includes(text));
  /** A first session that made its connections and failed: its run folder. */
  const failedRun = async (): Promise<string> => {
    const first = await svc(['--brief', 'x', '--worktree', '--provider', 'p']);
    assert.equal(first.code, 1, first.stderr);
    const run = (JSON.parse(first.stdout.trim().split('\n')[0]!) as { run: string }).run;
    return join(repo.repo, '.svc', 'runs', run);
  };
  /** The run's state.json as `change` leaves it (what only svc, or someone who can write the run folder, can do). */
  const editState = (dir: string, change: (state: Record<string, any>) => void): void => {
    const state = readJson(join(dir, 'state.json')) as Record<string, any>;
    change(state);
    writeFileSync(join(dir, 'state.json'), JSON.stringify(state));
  };
  const resume = async (dir: string) => {
    const second = await svc(['--resume', dir.split('/').pop()!]);
    assert.equal(second.code, 0, second.stderr);
    return network(dir);
  };
  const gapOf = (dir: string) => receipt(dir).gaps.filter((g) => g.startsWith('the earlier sessions\' egress records'));

  it('counts every session\'s connections in the receipt and egress.jsonl after --resume and --verify', async () => {
    const first = await svc(['--brief', 'x', '--worktree', '--provider', 'p']);
    assert.equal(first.code, 1, first.stderr);
    const run = (JSON.parse(first.stdout.trim().split('\n')[0]!) as { run: string }).run;
    const dir = join(repo.repo, '.svc', 'runs', run);
    assert.equal(network(dir).connections, 2);
    const firstLines = egressLines(dir);
    assert.equal(firstLines.length, 2);

    const second = await svc(['--resume', run]);
    assert.equal(second.code, 0, second.stderr);
    const resumed = network(dir);
    assert.equal(resumed.confined, true);
    assert.deepEqual([resumed.connections, resumed.denied], [4, 3]);
    assert.deepEqual(refused(resumed), ['not-allowed.example 1', 'second.example 1', 'third.example 1']);
    assert.equal(resumed.hosts.length, 1, 'the model API, reached in the first session');
    const resumedLines = egressLines(dir);
    assert.equal(resumedLines.length, 4);
    // The earlier session's lines stay as its gate wrote them; this session's follow.
    assert.deepEqual(resumedLines.slice(0, 2), firstLines);

    const third = await svc(['--verify', run]);
    assert.equal(third.code, 0, third.stderr);
    const verified = network(dir);
    assert.deepEqual([verified.connections, verified.denied], [5, 4]);
    assert.deepEqual(refused(verified), ['not-allowed.example 1', 'second.example 1', 'third.example 2']);
    assert.equal(verified.hosts.length, 1);
    assert.deepEqual(egressLines(dir).slice(0, 4), resumedLines);
    assert.equal(egressLines(dir).length, 5);
  });

  it('leaves out an egress.jsonl svc did not leave, keeping the totals of svc\'s own record', async () => {
    const first = await svc(['--brief', 'x', '--worktree', '--provider', 'p']);
    assert.equal(first.code, 1, first.stderr);
    const run = (JSON.parse(first.stdout.trim().split('\n')[0]!) as { run: string }).run;
    const dir = join(repo.repo, '.svc', 'runs', run);
    // Someone who can write the run folder rewrites the earlier session's evidence into an innocent one.
    const forged = { ...JSON.parse(egressLines(dir)[0]!) as object, host: 'innocent.example', decision: 'allowed' };
    writeFileSync(join(dir, 'artifacts', 'egress.jsonl'), JSON.stringify(forged) + '\n');

    const second = await svc(['--resume', run]);
    assert.equal(second.code, 0, second.stderr);
    const resumed = network(dir);
    assert.deepEqual([resumed.connections, resumed.denied], [4, 3]);
    assert.deepEqual(refused(resumed), ['second.example 1', 'third.example 1']);
    assert.deepEqual(resumed.hosts, []);
    assert.deepEqual(egressLines(dir).map((line) => (JSON.parse(line) as { host: string }).host).sort(),
      ['second.example', 'third.example']);
    assert.equal(notes(dir, 'egress.jsonl is not as svc left it').length, 1);
    // The file holds every record it can: no note says it keeps only some.
    assert.deepEqual(notes(dir, 'egress.jsonl keeps the first'), []);
    // The receipt says the hosts and denials it lists are not all of them.
    assert.equal(receipt(dir).verdict, 'verified_with_gaps');
    assert.deepEqual(gapOf(dir),
      ['the earlier sessions\' egress records were left out: egress.jsonl is not as svc left it (changed since)']);
  });

  it('leaves out svc\'s record in state.json when it is not one svc writes, and says so', async () => {
    const dir = await failedRun();
    editState(dir, (state) => {
      state.egress.connections = '7';
    });
    const resumed = await resume(dir);
    // Only this session's: the resumed agent's refusal and the check's.
    assert.deepEqual([resumed.connections, resumed.denied], [2, 2]);
    assert.deepEqual(gapOf(dir),
      ['the earlier sessions\' egress records were left out: state.json\'s egress record is not one svc writes']);
    assert.equal(notes(dir, 'state.json\'s egress record is not one svc writes').length, 1);
    assert.equal((readJson(join(dir, 'state.json')) as { egress: { connections: unknown } }).egress.connections, 2);
  });

  it('says an earlier egress.jsonl with no record of svc\'s is left out (a run made before svc kept one)', async () => {
    const dir = await failedRun();
    editState(dir, (state) => {
      delete state.egress;
    });
    const resumed = await resume(dir);
    assert.deepEqual([resumed.connections, resumed.denied], [2, 2]);
    assert.deepEqual(gapOf(dir),
      ['the earlier sessions\' egress records were left out: svc has no record of the egress.jsonl they left']);
    assert.equal(notes(dir, 'svc has no record of the egress.jsonl they left').length, 1);
  });

  it('says once that a session whose run already sent its events sends none', async () => {
    const dir = await failedRun();
    editState(dir, (state) => {
      state.egress.connections = 600;
    });
    const resumed = await resume(dir);
    assert.equal(resumed.connections, 602);
    assert.equal(events(dir).filter((e) => e.kind === 'egress').length, 2, 'the first session\'s only');
    assert.equal(notes(dir, 'this session\'s are not sent as events').length, 1);
    assert.deepEqual(gapOf(dir), []);
  });

  it('keeps the file from before a close svc was stopped in, with a gap for that session\'s lines', async () => {
    const dir = await failedRun();
    // As a worker stopped between its two writes leaves it: svc's record names the file it was about to write (its
    // connections counted), the file is still the one before.
    editState(dir, (state) => {
      state.egress = { ...state.egress, connections: state.egress.connections + 3, sha256: 'f'.repeat(64),
        previous: state.egress.sha256 };
    });
    const resumed = await resume(dir);
    assert.deepEqual([resumed.connections, resumed.denied], [7, 3]);
    assert.deepEqual(refused(resumed), ['not-allowed.example 1', 'second.example 1', 'third.example 1']);
    assert.equal(egressLines(dir).length, 4);
    assert.deepEqual(gapOf(dir),
      ['the earlier sessions\' egress records were left out: svc stopped before writing the last session\'s lines']);
    // svc writes its record first, naming the file before this close's.
    const record = (readJson(join(dir, 'state.json')) as { egress: { previous: string } }).egress;
    assert.match(record.previous, /^[0-9a-f]{64}$/);
  });

  it('meters a resumed run from nothing when state.json\'s metered cost is not one svc writes', async () => {
    const dir = await failedRun();
    editState(dir, (state) => {
      state.metered.calls = '7';
      writeFileSync(join(state.workdir as string, 'again.txt'), '');
    });
    await resume(dir);
    const state = readJson(join(dir, 'state.json')) as { metered: { calls: unknown } };
    assert.equal(state.metered.calls, 1);
    assert.equal(notes(dir, 'state.json\'s metered cost is not one svc writes').length, 1);
  });
});
