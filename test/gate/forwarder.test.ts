// The sandbox-side forwarder as its own process: `node forwarder.ts <socket> 0` prints its port, and a proxy
// request to that port reaches the gate's Unix socket and, through it, a loopback upstream.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { startGate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import {
  gateConnect, gateRequest, getOverTls, makeCert, recordingConnect, startUpstream, tableResolver, tempDir,
} from './helpers.ts';

const FORWARDER = fileURLToPath(new URL('../../src/gate/forwarder.ts', import.meta.url));

describe('gate forwarder', () => {
  it('listens on a loopback port and pipes each connection to the gate socket', async (t) => {
    const tmp = tempDir();
    const upstream = await startUpstream('127.0.0.2');
    const cert = makeCert(tmp.path);
    const tlsUpstream = await startUpstream('127.0.0.2', cert);
    const { resolve } = tableResolver({ 'local.test': ['127.0.0.2'], 'model.test': ['127.0.0.2'] });
    const gate = await startGate({
      policy: parseGatePolicy({
        allow: ['local.test', 'model.test', `127.0.0.2:${upstream.port}`, `127.0.0.2:${tlsUpstream.port}`],
      }),
      resolve,
      connect: recordingConnect().connect, socketPath: join(tmp.path, 'gate.sock'),
    });
    const began = performance.now();
    const child = spawn(process.execPath, [FORWARDER, gate.socketPath ?? '', '0'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const port = await new Promise<number>((done, fail) => {
        child.stdout.setEncoding('utf8');
        child.stdout.once('data', (line: string) => done(Number(line.trim())));
        child.once('exit', (code) => fail(new Error(`forwarder exited with ${code}`)));
      });
      t.diagnostic(`forwarder ready after ${(performance.now() - began).toFixed(1)} ms (spawn included)`);
      assert.ok(port > 0);
      const reply = await gateRequest({ port }, `http://local.test:${upstream.port}/via-forwarder`);
      assert.equal(reply.status, 200);
      assert.equal(reply.body, 'upstream GET /via-forwarder');
      const opened = await gateConnect({ port }, `model.test:${tlsUpstream.port}`);
      assert.ok('socket' in opened);
      assert.match(await getOverTls(opened.socket, 'model.test', '/tunnel', cert.cert), /upstream GET \/tunnel/);
      const refused = await gateRequest({ port }, 'http://elsewhere.example/');
      assert.equal(refused.status, 403);
    } finally {
      child.kill();
      await gate.close();
      await upstream.close();
      await tlsUpstream.close();
      tmp.remove();
    }
  });

  it('exits 2 with a usage line when the port is not a number', async () => {
    const child = spawn(process.execPath, [FORWARDER, '/nonexistent.sock', 'abc'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d: string) => (err += d));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    assert.equal(code, 2);
    assert.match(err, /^usage: /);
  });
});
