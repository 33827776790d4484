// An agent's process group without a sandbox: a program that cannot start, and output lines too long for one piece.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { spawnGroup } from '../../src/engine/spawn-group.ts';

const base = { cwd: tmpdir(), env: { PATH: process.env.PATH }, extra: {}, maxBytes: 1024 * 1024, timeoutMs: 30_000 };

describe('spawnGroup', () => {
  it('ends with code 127 and says why when the program cannot be started', async () => {
    const run = spawnGroup(['/nonexistent/agent', '--help'], { ...base, sandbox: null });
    assert.deepEqual(run.identity, { pid: 0, pgid: 0, proc_start: null });
    const done = await run.done;
    assert.equal(done.code, 127);
    assert.equal(done.sandboxFailed, false);
    assert.equal(done.output.toString(), 'failed to start: spawn /nonexistent/agent ENOENT\n');
  });

  it('hands a line past 64 KiB on in pieces, and a last line without its newline at the end', async () => {
    const lines: string[] = [];
    const script = "process.stdout.write('a'.repeat(200000) + '\\nlast')";
    const run = spawnGroup([process.execPath, '-e', script], {
      ...base, sandbox: null, onLine: (stream, line) => lines.push(`${stream}:${line}`),
    });
    assert.equal((await run.done).code, 0);
    assert.equal(lines.at(-1), 'stdout:last');
    const pieces = lines.slice(0, -1).map((l) => l.slice('stdout:'.length));
    assert.ok(pieces.length > 1, 'in more than one piece');
    assert.equal(pieces.join(''), 'a'.repeat(200000));
  });

  // A process that got away (here: it cleared svc's marker and left the session) holds the output pipes after the
  // first process exited: the run still ends (before, it waited for that process, a run `running` for as long).
  it('ends once the first process exited although a process that got away still holds its output', async () => {
    const script = '(env -i /usr/bin/setsid /bin/sleep 127.5 &) ; exit 0';
    const run = spawnGroup(['/bin/sh', '-c', script], { ...base, sandbox: null });
    try {
      const bound = new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 30_000).unref());
      const done = await Promise.race([run.done, bound]);
      assert.notEqual(done, 'hung', 'spawnGroup waited for the process that got away');
      assert.equal(done === 'hung' ? null : done.code, 0);
    } finally {
      try {
        execFileSync('pkill', ['-f', 'sleep 127.5']);
      } catch {
        // already gone
      }
    }
  });
});
