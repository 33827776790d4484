// The gate's port program as its own process: `node sandbox-port.ts 0`, given a node IPC channel, listens, hands the
// listening socket out over the channel, prints its port and exits; the gate serves the socket it was handed, and a
// proxy request to that port reaches a loopback upstream through it. Then in a real sandbox, both ways it is started
// (sandbox-command.ts): first, or behind systemd's activator at the agent's first connection.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Server } from 'node:net';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_LIMITS } from '../../src/spawn/limits.ts';
import { bwrapArgv, closeSandboxFds, openSandboxFds } from '../../src/spawn/bwrap-argv.ts';
import { GATE_CHANNEL_FD, PROXY_URL, sandboxGate, type SandboxGate } from '../../src/spawn/sandbox-command.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { startGate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import {
  gateConnect, gateRequest, getOverTls, makeCert, recordingConnect, startUpstream, tableResolver, tempDir,
} from './helpers.ts';

const PROGRAM = fileURLToPath(new URL('../../src/gate/sandbox-port.ts', import.meta.url));

/** Runs the program with `args`; its exit code, what it printed, and what it sent over the channel. */
async function runProgram(args: string[], ipc: boolean) {
  const child = spawn(process.execPath, [PROGRAM, ...args], {
    stdio: ['ignore', 'pipe', 'pipe', ...ipc ? ['ipc' as const] : []],
  });
  const sent: Array<{ message: unknown; handle: unknown }> = [];
  child.on('message', (message, handle) => sent.push({ message, handle }));
  let [out, err] = ['', ''];
  child.stdout!.on('data', (d: Buffer) => (out += d));
  child.stderr!.on('data', (d: Buffer) => (err += d));
  const [code] = await once(child, 'close') as [number | null];
  return { code, out, err, sent };
}

describe('the gate\'s port program', () => {
  it('hands a listening loopback socket out, prints its port and exits; the gate serves what it was handed',
    async (t) => {
      const tmp = tempDir();
      const upstream = await startUpstream('127.0.0.2');
      const cert = makeCert(tmp.path);
      const tlsUpstream = await startUpstream('127.0.0.2', cert);
      const { resolve } = tableResolver({ 'local.test': ['127.0.0.2'], 'model.test': ['127.0.0.2'] });
      const gate = await startGate({
        policy: parseGatePolicy({
          allow: ['local.test', 'model.test', `127.0.0.2:${upstream.port}`, `127.0.0.2:${tlsUpstream.port}`],
        }),
        resolve, connect: recordingConnect().connect,
      });
      try {
        const began = performance.now();
        const ran = await runProgram(['0'], true);
        t.diagnostic(`handed out and exited after ${(performance.now() - began).toFixed(1)} ms (spawn included)`);
        assert.equal(ran.code, 0, ran.err);
        assert.equal(ran.sent.length, 1);
        const [{ message, handle }] = ran.sent as [{ message: unknown; handle: unknown }];
        assert.equal(message, 'listening');
        assert.ok(handle instanceof Server);
        const address = handle.address();
        const port = typeof address === 'object' && address ? address.port : 0;
        assert.equal(ran.out, `${port}\n`);
        assert.equal(typeof address === 'object' && address?.address, '127.0.0.1');
        gate.serve(handle);
        const reply = await gateRequest({ port }, `http://local.test:${upstream.port}/via-port`);
        assert.equal(reply.status, 200);
        assert.equal(reply.body, 'upstream GET /via-port');
        const opened = await gateConnect({ port }, `model.test:${tlsUpstream.port}`);
        assert.ok('socket' in opened);
        assert.match(await getOverTls(opened.socket, 'model.test', '/tunnel', cert.cert), /upstream GET \/tunnel/);
        const refused = await gateRequest({ port }, 'http://elsewhere.example/');
        assert.equal(refused.status, 403);
      } finally {
        await gate.close();
        await upstream.close();
        await tlsUpstream.close();
        tmp.remove();
      }
    });

  it('exits 2 with a usage line when the port is not a number, or there is no channel to hand it out on', async () => {
    for (const [args, ipc] of [[['abc'], true], [['--fd', 'x'], true], [['0'], false]] as const) {
      const ran = await runProgram([...args], ipc);
      assert.equal(ran.code, 2);
      assert.match(ran.err, /^usage: /);
      assert.deepEqual(ran.sent, []);
    }
  });
});

/** The agent: one proxy request for `url` to the gate's port, printing its status and body or the error's code. */
const AGENT = `const http = require('node:http');
const { port, hostname } = new URL(process.argv[2]);
http.get({ host: hostname, port, path: process.argv[1] }, (res) => {
  let body = ''; res.on('data', (d) => (body += d)); res.on('end', () => console.log(res.statusCode + ' ' + body));
}).on('error', (e) => console.log(e.code));`;

/** Runs the agent in a real sandbox behind `gate`; what it printed, bwrap's stderr and exit code. */
async function runSandboxed(gate: SandboxGate, dir: string, url: string) {
  const plan = {
    readable: [], writable: [dir], protect: [], hidden: [], protocolReadable: [], protocolWritable: [],
    home: null, cwd: dir, limits: DEFAULT_LIMITS, network: gate,
  };
  const argv = bwrapArgv('bwrap', plan, [gate.node, '-e', AGENT, url, PROXY_URL]);
  const fds = openSandboxFds();
  const passed = fds.map((fd, i) => (3 + i === GATE_CHANNEL_FD ? 'ipc' as const : fd));
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe', ...passed] });
  closeSandboxFds(fds);
  child.on('message', (message, handle) => {
    if (message === 'listening' && handle instanceof Server) gate.serve(handle);
  });
  child.channel?.unref();
  let [out, err] = ['', ''];
  child.stdout!.on('data', (d: Buffer) => (out += d));
  child.stderr!.on('data', (d: Buffer) => (err += d));
  const [code] = await once(child, 'close') as [number | null];
  return { code, out, err };
}

describe('the gate\'s port in a real sandbox', { skip: bwrapWorks ? false : 'bwrap cannot run on this host' }, () => {
  const ways = [['first', false], ['behind systemd\'s activator', true]] as const;
  for (const [way, lazy] of ways) {
    it(`brings the agent's first request to the gate with the program run ${way}`, async (t) => {
      const tmp = tempDir();
      const upstream = await startUpstream('127.0.0.2');
      const { resolve } = tableResolver({ 'local.test': ['127.0.0.2'] });
      const gate = await startGate({
        policy: parseGatePolicy({ allow: ['local.test', `127.0.0.2:${upstream.port}`] }), resolve,
        connect: recordingConnect().connect,
      });
      try {
        const sandbox = sandboxGate(gate.serve, lazy);
        if (lazy && sandbox.activator === null) return t.skip('systemd-socket-activate is not installed');
        if (lazy) assert.match(sandbox.activator ?? '', /\/systemd-socket-activate$/);
        else assert.equal(sandbox.activator, null);
        const ran = await runSandboxed(sandbox, tmp.path, `http://local.test:${upstream.port}/first`);
        assert.equal(ran.code, 0, ran.err);
        assert.equal(ran.out, '200 upstream GET /first\n');
        assert.equal(ran.err, '');
      } finally {
        await gate.close();
        await upstream.close();
        tmp.remove();
      }
    });
  }

  it('refuses the agent\'s connection and says why on its stderr when the program fails behind the activator',
    async (t) => {
      const tmp = tempDir();
      const gate = await startGate({ policy: parseGatePolicy({ allow: [] }) });
      try {
        const sandbox = sandboxGate(gate.serve);
        if (sandbox.activator === null) return t.skip('systemd-socket-activate is not installed');
        // A stand-in for a program that cannot take the activator's socket: it says so the real one's way and exits.
        const program = join(tmp.path, 'failing-port.js');
        writeFileSync(program, "process.stderr.write('svc gate port: cannot listen on descriptor 4 (EBADF)\\n');" +
          'process.exit(1);\n');
        const ran = await runSandboxed({ ...sandbox, program }, tmp.path, 'http://local.test/');
        assert.equal(ran.code, 0, ran.err);
        assert.match(ran.out, /^(ECONNREFUSED|ECONNRESET)\n$/);
        assert.equal(ran.err, 'svc gate port: cannot listen on descriptor 4 (EBADF)\n');
      } finally {
        await gate.close();
        tmp.remove();
      }
    });
});
