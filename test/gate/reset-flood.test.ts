// The attack: anyone who can reach a shared gate, with no credential at all, sends a CONNECT (or an Upgrade GET) and
// resets the connection while the gate writes its refusal. Once node hands such a socket over ('connect', 'upgrade')
// it no longer listens for the socket's errors, so the peer's reset (ECONNRESET) used to end the gate's process.
// The gate runs as a child process here, so a crash is its exit, seen, not this test's own.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { gateRequest } from './helpers.ts';

const SERVER = fileURLToPath(new URL('./reset-flood-gate.ts', import.meta.url));
const LOOPS = 20;
const PER_LOOP = 150;

const HEADS: Record<string, string> = {
  connect: 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
  upgrade: 'GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
  malformed: 'BLAH\x01 / HTTP/1.1\r\n\r\n',
};

/** `LOOPS` clients in parallel, each `PER_LOOP` times: connect, send `head`, reset at once. */
function flood(port: number, head: string): Promise<void> {
  const loop = (left: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(head);
        setImmediate(() => socket.resetAndDestroy());
      });
      socket.on('error', () => {});
      socket.on('close', () => resolve());
    }).then(() => (left > 1 ? loop(left - 1) : undefined));
  return Promise.all(Array.from({ length: LOOPS }, () => loop(PER_LOOP))).then(() => undefined);
}

/** The gate child, its port, and how it ended (null while it runs). */
async function startGateProcess(): Promise<{ port: number; exited: () => number | string | null; stop(): void }> {
  const child: ChildProcess = spawn(process.execPath, [SERVER], { stdio: ['ignore', 'pipe', 'pipe'] });
  let exited: number | string | null = null;
  child.on('exit', (code, signal) => (exited = code ?? signal));
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /PORT (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', () => reject(new Error(`the gate ended before listening: ${stderr}`)));
  });
  return { port, exited: () => exited, stop: () => void (exited === null && child.kill()) };
}

describe('a flood of reset connections without a credential', () => {
  for (const kind of Object.keys(HEADS)) {
    it(`leaves the gate serving after ${kind} requests reset mid-refusal`, async (t) => {
      const gate = await startGateProcess();
      t.after(() => gate.stop());
      await flood(gate.port, HEADS[kind]!);
      assert.equal(gate.exited(), null, 'the gate process ended');
      // Still serving: a request without a credential gets its challenge.
      const reply = await gateRequest({ port: gate.port }, 'http://example.com/');
      assert.equal(reply.status, 407);
      assert.equal(gate.exited(), null, 'the gate process ended');
    });
  }
});
