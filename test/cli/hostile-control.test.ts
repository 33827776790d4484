// The CLI against a Control Plane that answers with hostile text (a server the user pointed it at, or one whose runner
// shipped the values): every value it prints stays on its own line, so no answer can add a line of its own.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild, type ChildResult } from '../helpers/run-child.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const FORGED = '\nverdict    verified\n';

const RUN = { source: 'local', run: 'r1', status: `running${FORGED}`, group_id: 'r1', started_at: '2026-01-01T00:00:00.000Z' };
// The server says the receipt is signed, so `svc runs show` prints its network line.
const RECEIPT = { network: { confined: true, connections: 1, denied: 0, hosts: [{ host: `api.example${FORGED}`, port: 443 }] } };
const SIGNED = { receipt_check: {
  signed_by: { kid: '0123456789abcdef', name: 'local', origin: 'local' }, problem: null, unknown_kid: null,
  sha256: createHash('sha256').update(JSON.stringify(RECEIPT)).digest('hex'),
} };
const ANSWERS: Record<string, unknown> = {
  'GET /v1/runs': { items: [], next_cursor: `abc${FORGED}` },
  'GET /v1/runs/local/r1': { ...RUN, ...SIGNED },
  'GET /v1/runs/local/r1/artifact/receipt.json': RECEIPT,
  'POST /v1/runs/local/r1/retry': { ...RUN, run: `r2${FORGED}` },
};

describe('the CLI against a Control Plane answering hostile text', () => {
  let server: Server;
  let url: string;
  let home: string;
  before(async () => {
    home = mkdtempSync(join(tmpdir(), 'svc-'));
    server = createServer((req, res) => {
      req.resume();
      const body = ANSWERS[`${req.method} ${req.url?.split('?')[0]}`];
      res.writeHead(body === undefined ? 404 : req.method === 'POST' ? 202 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body ?? { error: { code: 'not_found', message: 'Not found' } }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  after(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(home, { recursive: true, force: true });
  });

  function svc(args: string[]): Promise<ChildResult> {
    return runChild(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', HOME: home, SVC_CONTROL_URL: url } });
  }

  function assertNoForgedLine(r: ChildResult): void {
    assert.doesNotMatch(`${r.stdout}\n${r.stderr}`, /^verdict +verified/m, `${r.stdout}${r.stderr}`);
  }

  it('svc runs list prints the next cursor on one line', async () => {
    const r = await svc(['runs', 'list', '--url', url]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, 'More runs: svc runs list --cursor abc verdict verified\n');
  });

  it('svc runs show prints a receipt\'s host on the network line', async () => {
    const r = await svc(['runs', 'show', 'local/r1', '--url', url]);
    assert.equal(r.code, 0, r.stderr);
    assertNoForgedLine(r);
    assert.match(r.stdout, /^network +through the gate: 1 connections to api\.example verdict verified:443, 0 denied$/m);
  });

  it('svc runs retry names the new run on one line', async () => {
    const r = await svc(['runs', 'retry', 'local/r1', '--url', url]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'Retrying local/r1 as local/r2 verdict verified\n');
  });

  it('svc answer names a status that is not blocked on one line', async () => {
    const r = await svc(['answer', 'local/r1', 'yes']);
    assert.notEqual(r.code, 0);
    assertNoForgedLine(r);
    assert.match(r.stderr, /is running verdict verified, not blocked/);
  });
});
