// `svc runs show` against a real Control Plane: one value column, and costs with the digits that matter.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, seedRuns, type TestControl } from '../helpers/control-server.ts';
import { runChild, type ChildResult } from '../helpers/run-child.ts';
import { formatUsd } from '../../src/cli/runs-format.ts';
import { issueReceipt, RECEIPT_TYPE, type ReceiptBody } from '../../src/engine/receipt.ts';
import { loadOrCreateSigningKey } from '../../src/keys.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
let control: TestControl;
let home: string;

function svc(args: string[]): Promise<ChildResult> {
  const env = { PATH: process.env.PATH ?? '', HOME: home, SVC_CONTROL_URL: control.url };
  return runChild(process.execPath, [CLI, 'runs', ...args], { env });
}

before(async () => {
  home = mkdtempSync(join(tmpdir(), 'svc-'));
  control = await startTestControl();
});
after(async () => {
  await control.close();
  rmSync(home, { recursive: true, force: true });
});

describe('svc runs show', () => {
  it('lines every value up in one column, started_at and updated_at included, and shows $0.0123 as such', async () => {
    const ended = Date.UTC(2026, 0, 1, 0, 2, 5);
    const [id] = seedRuns(control.deps, 1, {
      brief: 'Fix the login bug', provider: 'claude', cost_usd: 0.0123, tokens_in: 1200, tokens_out: 340,
      exit_code: 0, ended_at: ended, updated_at: ended,
    });
    const r = await svc(['show', `local/${id}`]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, [
      `run        local/${id}`,
      'status     succeeded',
      'verdict    verified',
      'repo       acme/api',
      'brief      Fix the login bug',
      'provider   claude',
      `group_id   ${id}`,
      'started_at 2026-01-01T00:00:00.000Z',
      'ended_at   2026-01-01T00:02:05.000Z',
      'updated_at 2026-01-01T00:02:05.000Z',
      'cost_usd   $0.0123',
      'tokens_in  1200',
      'tokens_out 340',
      'exit_code  0',
      '',
    ].join('\n'));
  });

  // The receipt.json is whatever the run's shipper sent (a pod's run container, where the agent runs, can): its network
  // line is printed only when the Control Plane verified its signature with a key it knows.
  it('prints the receipt\'s network line only for a receipt signed by a known key', async () => {
    const [id] = seedRuns(control.deps, 1, { run: 'rnetwork' });
    const body = {
      type: RECEIPT_TYPE, version: 1, source: 'local', run: id, verdict: 'verified', checks: [], gaps: [],
      network: { confined: true, connections: 3, denied: 0, hosts: [{ host: 'api.example', port: 443 }] },
    } as unknown as ReceiptBody;
    const put = (receipt: unknown) => control.deps.stores.artifacts.put('local', id!, {
      path: 'receipt.json', content_type: 'application/json', content: Buffer.from(JSON.stringify(receipt)),
    });
    const signed = issueReceipt(body, loadOrCreateSigningKey(control.deps.settings.svcHome));
    put({ ...signed, verdict: 'not_verified' });
    const forged = await svc(['show', `local/${id}`]);
    assert.equal(forged.code, 0, forged.stderr);
    assert.doesNotMatch(forged.stdout, /^network/m);
    put(signed);
    const shown = await svc(['show', `local/${id}`]);
    assert.match(shown.stdout, /\nnetwork    through the gate: 3 connections to api\.example:443, 0 denied\n$/);
  });

  // The CLI reads run detail, then fetches receipt.json: a file replaced in between is not the one the server checked.
  it('prints no network line when the receipt fetched is not the one the Control Plane checked', async () => {
    const [id] = seedRuns(control.deps, 1, { run: 'rswapped' });
    const body = {
      type: RECEIPT_TYPE, version: 1, source: 'local', run: id, verdict: 'verified', checks: [], gaps: [],
      network: { confined: true, connections: 3, denied: 0, hosts: [{ host: 'api.example', port: 443 }] },
    } as unknown as ReceiptBody;
    const put = (receipt: unknown) => control.deps.stores.artifacts.put('local', id!, {
      path: 'receipt.json', content_type: 'application/json', content: Buffer.from(JSON.stringify(receipt)),
    });
    put(issueReceipt(body, loadOrCreateSigningKey(control.deps.settings.svcHome)));
    const artifacts = control.deps.stores.artifacts;
    const get = artifacts.get.bind(artifacts);
    let reads = 0;
    // The first read is run detail's check; the file is replaced right after it, before the CLI fetches it.
    artifacts.get = (source, run, path) => {
      const row = get(source, run, path);
      if (run === id && path === 'receipt.json' && ++reads === 1) {
        put({ ...body, network: { ...body.network as object, hosts: [{ host: 'evil.example', port: 443 }] } });
      }
      return row;
    };
    try {
      const shown = await svc(['show', `local/${id}`]);
      assert.equal(shown.code, 0, shown.stderr);
      assert.doesNotMatch(shown.stdout, /^network/m);
    } finally {
      artifacts.get = get;
    }
  });

  it('says unknown for a run without a cost, in the cost line\'s own place', async () => {
    const [id] = seedRuns(control.deps, 2, { cost_usd: null, tokens_in: 5 }).slice(1);
    const r = await svc(['show', `local/${id}`]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /\ncost_usd   unknown\ntokens_in  5\n$/);
  });
});

describe('formatUsd', () => {
  it('keeps cents for a dollar or more and two significant digits below', () => {
    const cases: Array<[number, string]> = [
      [0, '$0.00'], [0.0123, '$0.0123'], [0.004, '$0.004'], [0.0099, '$0.0099'], [0.01, '$0.01'], [0.1, '$0.10'],
      [0.5, '$0.50'], [1.5, '$1.50'], [1234.5678, '$1234.57'], [0.000042, '$0.000042'],
    ];
    for (const [usd, text] of cases) assert.equal(formatUsd(usd), text, String(usd));
  });
});

describe('a failed run in svc runs', () => {
  it('shows its failure class and reason, lists it under --failure, and refuses an unknown class', async () => {
    const [id] = seedRuns(control.deps, 1, {
      run: 'rfailedcheck', status: 'failed', verdict: 'not_verified', brief: 'break the build',
      failure_class: 'checks', failure_reason: 'Required check "unit" failed (exit 1)', failure_retryable: 0,
    }, 'shown');
    const show = await svc(['show', `shown/${id}`]);
    assert.equal(show.code, 0, show.stderr);
    assert.match(show.stdout, /^failure    checks: Required check "unit" failed \(exit 1\)$/m);
    const list = await svc(['list', '--failure', 'checks']);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /shown\/rfailedcheck +failed +not_verified +/);
    assert.doesNotMatch(list.stdout, /succeeded/);
    const none = await svc(['list', '--failure', 'infra', '--json']);
    assert.deepEqual(JSON.parse(none.stdout).items, []);
    // A reason from the server reaches the terminal as one safe line: no escape sequence, no second line.
    seedRuns(control.deps, 1, {
      run: 'rhostilereason', status: 'failed', failure_class: 'agent', failure_reason: 'gave up\u001b[2J\nroot# ',
      failure_retryable: 0,
    }, 'shown');
    const hostile = await svc(['show', 'shown/rhostilereason']);
    const line = hostile.stdout.split('\n').find((l) => l.startsWith('failure'))!;
    assert.doesNotMatch(line, /\u001b/);
    assert.match(line, /^failure    agent: gave up/);
    assert.doesNotMatch(hostile.stdout, /^root# /m);
    const bad = await svc(['list', '--failure', 'gremlins']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /Invalid --failure "gremlins" \(expected infra, config, agent, checks, policy, budget, limit, stopped\)/);
  });
});
