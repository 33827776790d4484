// Events tell each fact once: one `answer` event per answer, and status transitions whose `from`
// is the status recorded before them, however the Control Plane's own events and the runner's shipped ones interleave.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';

const T0 = '2026-02-01T10:00:00.000Z';
type Ev = { kind: string; data: Record<string, unknown> };

describe('events tell the truth once', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
  });
  after(() => cp.close());

  let seq = 0;
  async function ship(run: string, status: string, events: Array<[string, Record<string, unknown>]>): Promise<void> {
    const body = {
      source: 'laptop',
      runs: [{ run, status, started_at: T0, updated_at: new Date(Date.parse(T0) + ++seq * 1000).toISOString() }],
      events: events.map(([kind, data]) => ({ run, seq: ++seq, ts: T0, kind, data })),
    };
    const res = await cp.request('POST', '/v1/ingest', { body });
    assert.equal(res.status, 200, res.text);
  }

  async function events(run: string): Promise<Ev[]> {
    return (await cp.request('GET', `/v1/runs/laptop/${run}/events?limit=500`)).json.items;
  }

  function transitions(list: Ev[]): string[] {
    return list.filter((e) => e.kind === 'run.status').map((e) => `${e.data.from}→${e.data.to}`);
  }

  it('stores one answer event for an answer given through the Control Plane and used by the runner', async () => {
    await ship('ra1', 'blocked', [['run.status', { from: 'queued', to: 'running' }], ['question', { question: 'Which DB?' }], ['run.status', { from: 'running', to: 'blocked' }]]);
    const answered = await cp.request('POST', '/v1/runs/laptop/ra1/answer', { body: { answer: 'postgres' } });
    assert.equal(answered.status, 202);
    await ship('ra1', 'running', [['answer', { answer: 'postgres' }], ['run.status', { from: 'blocked', to: 'running' }]]);
    // The same answer to a second question is a second answer.
    await ship('ra1', 'blocked', [['question', { question: 'Which version?' }], ['run.status', { from: 'running', to: 'blocked' }]]);
    assert.equal((await cp.request('POST', '/v1/runs/laptop/ra1/answer', { body: { answer: 'postgres' } })).status, 202);
    await ship('ra1', 'running', [['answer', { answer: 'postgres' }], ['run.status', { from: 'blocked', to: 'running' }]]);
    const list = await events('ra1');
    assert.deepEqual(list.filter((e) => e.kind === 'answer' || e.kind === 'question').map((e) => e.kind), ['question', 'answer', 'question', 'answer']);
  });

  it('keeps the runner answer event when the answer came another way (svc answer on the CLI)', async () => {
    await ship('ra2', 'blocked', [['question', { question: 'Which DB?' }], ['run.status', { from: 'running', to: 'blocked' }]]);
    await ship('ra2', 'running', [['answer', { answer: 'mysql' }], ['run.status', { from: 'blocked', to: 'running' }]]);
    assert.deepEqual((await events('ra2')).filter((e) => e.kind === 'answer').map((e) => e.data.answer), ['mysql']);
  });

  it('reads running→stopping→stopped for a run stopped through the Control Plane whose runner never saw stopping', async () => {
    await ship('rs1', 'running', [['run.status', { from: 'queued', to: 'running' }]]);
    const stop = await cp.request('POST', '/v1/runs/laptop/rs1/stop', { body: {} });
    assert.equal(stop.status, 202);
    await ship('rs1', 'stopped', [['run.status', { from: 'running', to: 'stopped' }]]);
    assert.deepEqual(transitions(await events('rs1')), ['queued→running', 'running→stopping', 'stopping→stopped']);
  });

  it('reads queued→stopping→stopped when the runner\'s earlier queued/running events arrive after the stop', async () => {
    // The Control Plane only knows the run as queued when it is stopped; the runner ships its history afterwards.
    cp.deps.stores.runs.upsert('laptop', { run: 'rs4', status: 'queued', started_at: Date.parse(T0), updated_at: Date.parse(T0) });
    assert.equal((await cp.request('POST', '/v1/runs/laptop/rs4/stop', { body: {} })).status, 202);
    await ship('rs4', 'stopped', [['run.status', { from: null, to: 'queued' }], ['run.status', { from: 'queued', to: 'running' }], ['run.status', { from: 'running', to: 'stopped' }]]);
    assert.deepEqual(transitions(await events('rs4')), ['queued→stopping', 'stopping→stopped']);
    // A resume starts a new chain from stopped.
    await ship('rs4', 'running', [['run.status', { from: 'stopped', to: 'running' }]]);
    assert.deepEqual(transitions(await events('rs4')).slice(-1), ['stopped→running']);
  });

  it('keeps a stopped run stopped when a runner that never saw the stop ships it queued and running after it', async () => {
    cp.deps.stores.runs.upsert('laptop', { run: 'rs5', status: 'queued', started_at: Date.parse(T0), updated_at: Date.parse(T0) });
    assert.equal((await cp.request('POST', '/v1/runs/laptop/rs5/stop', { body: {} })).status, 202);
    // As the run controller ends a run it found nothing of to signal.
    cp.deps.stores.runs.setStatus('laptop', 'rs5', 'stopped', Date.now(), { ended_at: Date.now() });
    cp.deps.stores.events.append('laptop', 'rs5', { kind: 'run.status', data: { from: 'stopping', to: 'stopped' } });
    const late = async (status: string, moves: Array<Record<string, unknown>>) => {
      const now = new Date().toISOString();
      const body = {
        source: 'laptop', runs: [{ run: 'rs5', status, started_at: T0, updated_at: now }],
        events: moves.map((data) => ({ run: 'rs5', seq: ++seq, ts: now, kind: 'run.status', data })),
      };
      assert.equal((await cp.request('POST', '/v1/ingest', { body })).status, 200);
    };
    await late('running', [{ from: null, to: 'queued' }, { from: 'queued', to: 'running' }]);
    assert.equal(cp.deps.stores.runs.get('laptop', 'rs5')?.status, 'stopped');
    assert.deepEqual(transitions(await events('rs5')), ['queued→stopping', 'stopping→stopped']);
    // A resume moves it on: the runner's own transition starts from the stop it saw.
    await late('running', [{ from: 'stopped', to: 'running' }]);
    assert.equal(cp.deps.stores.runs.get('laptop', 'rs5')?.status, 'running');
    assert.deepEqual(transitions(await events('rs5')).slice(-1), ['stopped→running']);
  });

  it('does not store a transition twice when the Control Plane already recorded it', async () => {
    await ship('rs2', 'running', [['run.status', { from: 'queued', to: 'running' }]]);
    assert.equal((await cp.request('POST', '/v1/runs/laptop/rs2/stop', { body: {} })).status, 202);
    // As the run controller does for a worker killed before it could ship its own "stopped".
    cp.deps.stores.events.append('laptop', 'rs2', { kind: 'run.status', data: { from: 'stopping', to: 'stopped' } });
    await ship('rs2', 'stopped', [['run.status', { from: 'running', to: 'stopped' }]]);
    const list = transitions(await events('rs2'));
    assert.deepEqual(list, ['queued→running', 'running→stopping', 'stopping→stopped']);
  });

  it('every stored transition starts where the previous one ended, also within one batch', async () => {
    await ship('rs3', 'succeeded', [
      ['run.status', { from: null, to: 'queued' }],
      ['run.status', { from: 'queued', to: 'running' }],
      ['run.status', { from: 'queued', to: 'blocked' }],
      ['run.status', { from: 'blocked', to: 'running' }],
      ['run.status', { from: 'running', to: 'succeeded' }],
    ]);
    assert.deepEqual(transitions(await events('rs3')), ['null→queued', 'queued→running', 'running→blocked', 'blocked→running', 'running→succeeded']);
  });
});
