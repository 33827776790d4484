// The egress gate as a real server on a Unix socket and on 127.0.0.1:0: CONNECT tunnels and plain HTTP reach
// loopback upstreams only when the policy names their exact address and port; names that resolve to metadata,
// private, CGNAT or IPv6-local addresses are refused before any connection opens (a recording connect function
// proves it); every request leaves one record. Every packet here goes to a loopback address.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect as netConnect, createServer as createTcpServer, type AddressInfo } from 'node:net';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import {
  gateConnect, gateRequest, getOverTls, handTo, recordingConnect, startUpstream, tableResolver, tempDir,
  type Cert, type Reply, type Upstream,
} from './helpers.ts';
import { makeCert as makeCertFor } from '../trigger/standins.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { waitFor } from '../helpers/wait-for.ts';

describe('egress gate', () => {
  const tmp = tempDir();
  const recorder = recordingConnect();
  const records: EgressRecord[] = [];
  let upstream: Upstream;
  let tlsUpstream: Upstream;
  let v6: Upstream;
  let cert: Cert;
  let gate: Gate;
  let tcp: { port: number };
  let handed: { port: number };
  const { resolve, lookups } = tableResolver({
    'metadata.test': ['169.254.169.254'],
    'lan.test': ['10.0.0.5'],
    'cgnat.test': ['100.64.1.1'],
    'ec2v6.test': ['fd00:ec2::254'],
    'mapped.test': ['::ffff:127.0.0.1'],
    'mixed.test': ['93.184.216.34', '192.168.1.1'],
    'local.test': ['127.0.0.2'],
  });

  before(async () => {
    cert = makeCertFor(tmp.path, 'local.test', ['DNS:local.test', 'IP:127.0.0.2', 'IP:::1']);
    upstream = await startUpstream('127.0.0.2');
    tlsUpstream = await startUpstream('127.0.0.2', cert);
    v6 = await startUpstream('::1', cert);
    const policy = parseGatePolicy({
      allow: ['*.test', `127.0.0.2:${upstream.port}`, `127.0.0.2:${tlsUpstream.port}`, `[::1]:${v6.port}`,
        'forbidden.example'],
      deny: ['forbidden.example'],
    });
    gate = await startGate({
      policy, tcpPort: 0, resolve, connect: recorder.connect,
      onRecord: (r) => records.push(r),
    });
    tcp = { port: gate.port ?? 0 };
    handed = await handTo(gate);
  });

  after(async () => {
    await gate.close();
    await upstream.close();
    await tlsUpstream.close();
    await v6.close();
    tmp.remove();
  });

  /** The record the gate wrote for the request whose host is `host` (records arrive as connections end). */
  async function recordFor(host: string, port: number): Promise<EgressRecord> {
    for (let i = 0; i < 200; i++) {
      const found = records.find((r) => r.host === host && r.port === port);
      if (found) return found;
      await new Promise((r) => setImmediate(r));
    }
    throw new Error(`no record for ${host}:${port}`);
  }

  it('tunnels CONNECT from a port handed to it to a loopback address the policy names exactly', async () => {
    const before = recorder.calls.length;
    const opened = await gateConnect(handed, `local.test:${tlsUpstream.port}`);
    assert.ok('socket' in opened, 'the tunnel opened');
    const text = await getOverTls(opened.socket, 'local.test', '/through-tunnel', cert.cert);
    assert.match(text, /^HTTP\/1\.1 200/);
    assert.match(text, /upstream GET \/through-tunnel/);
    assert.deepEqual(recorder.calls.slice(before), [{ address: '127.0.0.2', port: tlsUpstream.port }]);
    const record = await recordFor('local.test', tlsUpstream.port);
    assert.equal(record.decision, 'allowed');
    assert.equal(record.kind, 'connect');
    assert.equal(record.sni, 'local.test');
    assert.equal(record.rule, `127.0.0.2:${tlsUpstream.port}`);
    assert.equal(record.address, '127.0.0.2');
    assert.ok(record.bytesUp > 0 && record.bytesDown > text.length - 1, 'counts bytes both ways');
  });

  it('tunnels CONNECT on 127.0.0.1:0 to [::1] named exactly', async () => {
    const opened = await gateConnect(tcp, `[::1]:${v6.port}`);
    assert.ok('socket' in opened);
    assert.match(await getOverTls(opened.socket, '[::1]', '/v6', cert.cert), /upstream GET \/v6/);
  });

  it('forwards absolute-form plain HTTP and records the method', async () => {
    const reply = await gateRequest(handed, `http://local.test:${upstream.port}/plain?q=1`, {
      method: 'POST', body: 'hello', headers: { 'proxy-authorization': 'Basic secret', 'x-keep': 'kept' },
    });
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'upstream POST /plain?q=1');
    const seen = upstream.seen.at(-1);
    assert.equal(seen?.body, 'hello');
    assert.equal(seen?.headers.host, `local.test:${upstream.port}`);
    assert.equal(seen?.headers['x-keep'], 'kept');
    assert.equal(seen?.headers['proxy-authorization'], undefined, 'proxy credentials stop at the gate');
    const record = records.find((r) => r.kind === 'http' && r.method === 'POST');
    assert.equal(record?.status, 200);
  });

  for (const name of ['metadata.test', 'lan.test', 'cgnat.test', 'ec2v6.test', 'mapped.test', 'mixed.test']) {
    it(`refuses CONNECT to ${name} with 403 before opening any connection`, async () => {
      const before = recorder.calls.length;
      const reply = (await gateConnect(tcp, `${name}:443`)) as Reply;
      assert.equal(reply.status, 403);
      assert.match(reply.body, /^svc gate: /);
      assert.equal(recorder.calls.length, before, 'no connection was opened');
      const record = await recordFor(name, 443);
      assert.equal(record.decision, 'denied');
      assert.ok(record.address, 'the refused address is evidence');
    });
  }

  for (const literal of ['169.254.169.254:80', '[fd00:ec2::254]:80', '0x7f.1:80', '[::ffff:a9fe:a9fe]:80']) {
    it(`refuses plain HTTP to the literal ${literal} before opening any connection`, async () => {
      const before = recorder.calls.length;
      const reply = await gateRequest(tcp, `http://${literal}/latest/meta-data/`);
      assert.equal(reply.status, 403);
      assert.equal(recorder.calls.length, before);
    });
  }

  it('refuses loopback on a port the policy does not name, by address', async () => {
    const before = recorder.calls.length;
    const reply = await gateRequest(tcp, `http://local.test:${upstream.port + 1}/`);
    assert.equal(reply.status, 403);
    assert.match(reply.body, /127\.0\.0\.2/);
    assert.equal(recorder.calls.length, before);
  });

  it('refuses what the policy denies and what it does not allow, naming the rule', async () => {
    const denied = (await gateConnect(tcp, 'forbidden.example:443')) as Reply;
    assert.equal(denied.status, 403);
    assert.equal((await recordFor('forbidden.example', 443)).rule, 'forbidden.example');
    const unlisted = (await gateConnect(tcp, 'other.example:443')) as Reply;
    assert.equal(unlisted.status, 403);
    assert.match(unlisted.body, /not in the allow list/);
  });

  it('resolves each name once and connects to the address it checked', async () => {
    const before = lookups.length;
    const reply = await gateRequest(tcp, `http://local.test:${upstream.port}/once`);
    assert.equal(reply.status, 200);
    assert.deepEqual(lookups.slice(before), ['local.test']);
    assert.deepEqual(recorder.calls.at(-1), { address: '127.0.0.2', port: upstream.port });
  });

  it('answers 400 to oddities: userinfo, https in absolute form, no port, origin-form', async () => {
    assert.equal((await gateRequest(tcp, `http://user:pw@local.test:${upstream.port}/`)).status, 400);
    assert.equal((await gateRequest(tcp, 'https://local.test/')).status, 400);
    assert.equal(((await gateConnect(tcp, 'local.test')) as Reply).status, 400);
    assert.equal(((await gateConnect(tcp, 'local.test:70000')) as Reply).status, 400);
    assert.equal((await gateRequest(tcp, '/just/a/path')).status, 400);
  });

  it('refuses a request head over the size cap with 431', async () => {
    const before = upstream.seen.length;
    const big = { headers: { 'x-big': 'a'.repeat(20_000) } };
    const reply = await gateRequest(tcp, `http://local.test:${upstream.port}/`, big);
    assert.equal(reply.status, 431);
    assert.equal(upstream.seen.length, before);
  });

  it('writes nothing but loopback addresses into connect calls', () => {
    for (const call of recorder.calls) assert.ok(['127.0.0.2', '::1'].includes(call.address), call.address);
  });
});

describe('egress gate limits', () => {
  it('closes connections over the connection cap', async () => {
    const tmp = tempDir();
    const gate = await startGate({
      policy: parseGatePolicy({}), tcpPort: 0, limits: { maxConnections: 1 }, connect: recordingConnect().connect,
      resolve: tableResolver({}).resolve,
    });
    try {
      const first = netConnect(gate.port ?? 0, '127.0.0.1');
      await new Promise((r) => first.once('connect', r));
      // Half a request head keeps it open; the listener accepts in arrival order, so it is counted first.
      first.write('GET /x HTTP/1.1\r\n');
      const second = netConnect(gate.port ?? 0, '127.0.0.1');
      const closed = await new Promise<string>((r) => {
        second.on('data', () => r('data'));
        second.on('close', () => r('closed'));
        second.write('GET /x HTTP/1.1\r\nhost: x\r\n\r\n');
      });
      assert.equal(closed, 'closed');
      first.destroy();
    } finally {
      await gate.close();
      tmp.remove();
    }
  });

  it('answers 502 "idle timeout" to a plain-HTTP request whose destination goes quiet, and records it', async () => {
    const silent = createTcpServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.2', r));
    const port = (silent.address() as AddressInfo).port;
    const records: EgressRecord[] = [];
    const gate = await startGate({
      policy: parseGatePolicy({ allow: [`127.0.0.2:${port}`] }), tcpPort: 0, limits: { idleMs: 50 },
      connect: recordingConnect().connect, onRecord: (r) => records.push(r),
    });
    try {
      const answer = await gateRequest({ port: gate.port ?? 0 }, `http://127.0.0.2:${port}/slow`);
      assert.equal(answer.status, 502);
      assert.equal(answer.body, 'svc gate: idle timeout\n');
      await waitFor(() => records.length === 1, 'the record');
      const [record] = records;
      assert.deepEqual([record?.decision, record?.status, record?.reason], ['allowed', 502, 'idle timeout']);
    } finally {
      await gate.close();
      silent.close();
    }
  });
});

describe('starting the gate', () => {
  it('closes the ports handed to it as it closes, and one handed to it after', async () => {
    const gate = await startGate({ policy: parseGatePolicy({}) });
    const reached = (port: number) => new Promise<boolean>((r) => {
      const probe = netConnect(port, '127.0.0.1');
      probe.once('connect', () => r(true)).once('error', () => r(false));
      probe.once('connect', () => probe.destroy());
    });
    const first = await handTo(gate);
    assert.equal(await reached(first.port), true, 'the gate serves a port handed to it');
    await gate.close();
    assert.equal(await reached(first.port), false, 'that port listens no more');
    const late = await handTo(gate);
    assert.equal(await reached(late.port), false, 'a port handed to a closed gate is closed');
  });

  // A run's gate listens before its sandbox starts and loads its forwarding after the agent's spawn (docs/bench.md).
  it('holds a request until its handlers load, and closes when they cannot: nothing is left listening', async () => {
    const gateModule = new URL('../../src/gate/gate.ts', import.meta.url).href;
    const program = `import { registerHooks } from 'node:module';
      import { connect } from 'node:net';
      registerHooks({ load(url, context, next) {
        if (url.endsWith('/src/gate/forward.ts')) throw new Error('forward.ts is unreadable');
        return next(url, context);
      } });
      const { startGate } = await import(${JSON.stringify(gateModule)});
      const gate = await startGate({ policy: { allow: [], deny: [] }, tcpPort: 0, log: { error() {} } });
      const exchange = (text) => new Promise((resolve) => {
        let out = '';
        const socket = connect(gate.port, '127.0.0.1', () => socket.end(text));
        socket.on('data', (d) => (out += d)).on('close', () => resolve(out)).on('error', (e) => resolve(e.code));
      });
      const answer = await exchange('GET http://127.0.0.2:9/ HTTP/1.1\\r\\nHost: 127.0.0.2:9\\r\\n\\r\\n');
      const load = await gate.load().then(() => 'loaded', (e) => e.message);
      const after = await exchange('GET http://127.0.0.2:9/ HTTP/1.1\\r\\nHost: 127.0.0.2:9\\r\\n\\r\\n');
      process.stdout.write(JSON.stringify({ answer, load, after }));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', program]);
    const { answer, load, after } = JSON.parse(stdout) as { answer: string; load: string; after: string };
    assert.match(answer, /^HTTP\/1\.1 502 /, 'the waiting request was answered, not left open');
    assert.equal(load, 'forward.ts is unreadable');
    assert.equal(after, 'ECONNREFUSED', 'the gate listens no more');
  });
});
