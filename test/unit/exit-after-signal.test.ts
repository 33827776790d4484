// A server's shutdown on signals: the first SIGINT or SIGTERM starts a graceful stop, and a second signal of
// either kind ends the process at once (an operator's Ctrl-C, then systemd's SIGTERM, must not wait out the stop),
// by exit, since a container's PID 1 (node under bin/svc's exec) ignores a signal's default action.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';

const HTTP_SERVER = fileURLToPath(new URL('../../src/http/http-server.ts', import.meta.url));
const LOG = fileURLToPath(new URL('../../src/log.ts', import.meta.url));

/** A process whose stop never ends: "ready" once it listens for signals, "stopping" when one starts the stop, and
 * "exit N" if the stop ever resolved. */
function hangingServer() {
  const script = `
    const { exitCodeAfterSignal } = await import(${JSON.stringify(HTTP_SERVER)});
    const { createLogger } = await import(${JSON.stringify(LOG)});
    setInterval(() => {}, 1000); // a server's listening socket, which keeps the process up
    const log = createLogger('test', () => process.stdout.write('stopping\\n'));
    const exiting = exitCodeAfterSignal(log, 'stopping', () => new Promise(() => {}));
    process.stdout.write('ready\\n');
    process.stdout.write('exit ' + await exiting + '\\n');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  const waiters: { word: string; resolve: () => void }[] = [];
  child.stdout.on('data', (chunk: string) => {
    out += chunk;
    for (const w of waiters) if (out.includes(w.word)) w.resolve();
  });
  const printed = (word: string) => new Promise<void>((resolve) => {
    waiters.push({ word, resolve });
    if (out.includes(word)) resolve();
  });
  return { child, printed, output: () => out };
}

describe('exitCodeAfterSignal', () => {
  for (const [first, second] of [['SIGINT', 'SIGTERM'], ['SIGTERM', 'SIGINT'], ['SIGINT', 'SIGINT']] as const) {
    it(`ends the process at once on ${second} after ${first} started a stop that hangs`, async () => {
      const server = hangingServer();
      try {
        const exited = once(server.child, 'exit');
        await server.printed('ready');
        server.child.kill(first);
        await server.printed('stopping');
        server.child.kill(second);
        // By exit with the signal's shell status, as a container's PID 1 ignores a signal's default action.
        assert.deepEqual(await exited, [128 + constants.signals[second], null]);
        assert.doesNotMatch(server.output(), /exit/);
      } finally {
        server.child.kill('SIGKILL');
      }
    });
  }
});
