// "Durable before 2xx" under a crash: each delivery commits in its own transaction before its 202, and a
// SIGKILL in the middle of a burst never loses one that was answered 202.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { SECRETS, FAKE_SVC, get, makeRepo, tempDir } from './helpers.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
const children: ChildProcess[] = [];

after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

function serve(env: NodeJS.ProcessEnv, args: string[]): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const child = spawn(process.execPath, [CLI, 'trigger', 'serve', '--port', '0', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = /^(http:\/\/\S+)\n/.exec(out);
      if (line) resolve({ child, url: line[1]!, stderr: () => err });
    });
    child.on('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
}

describe('trigger intake under SIGKILL', () => {
  it('loses no delivery that was answered 202 when killed mid-burst', async () => {
    const home = tempDir('svc-home-');
    const repo = makeRepo();
    const env = { PATH: process.env.PATH, HOME: home, ...SECRETS, SVC_TRIGGER_CLI: FAKE_SVC, SVC_TRIGGER_QUEUE_MAX: '100000' };
    // Every accepted job must be found after the restart, queued or already run.
    const args = ['--repo', repo, '--concurrency', '1'];
    const first = await serve(env, args);

    const accepted: string[] = [];
    let refused = 0;
    let killed = false;
    // 8 connections posting unique bodies; the kill lands while requests are in flight.
    const senders = Array.from({ length: 8 }, async (_, c) => {
      for (let i = 0; !killed; i++) {
        try {
          const res = await fetch(`${first.url}/jobs`, {
            method: 'POST', headers: { ...bearer, 'content-type': 'application/json' },
            body: JSON.stringify({ brief: `crash burst ${c}-${i}` }),
          });
          const body = (await res.json()) as { job_id?: string };
          if (res.status === 202 && body.job_id) accepted.push(body.job_id);
          else refused += 1;
        } catch {
          return; // the connection died with the server
        }
      }
    });
    while (accepted.length < 150) await new Promise((r) => setTimeout(r, 5));
    killed = true;
    first.child.kill('SIGKILL');
    await Promise.all(senders);
    await new Promise((r) => (first.child.exitCode !== null || first.child.signalCode !== null ? r(null) : first.child.once('exit', r)));
    assert.equal(refused, 0);

    const second = await serve(env, args);
    const missing: string[] = [];
    for (const id of accepted) if ((await get(`${second.url}/jobs/${id}`, bearer)).status !== 200) missing.push(id);
    assert.deepEqual(missing, [], `${missing.length} of ${accepted.length} acknowledged deliveries lost`);
    await new Promise((r) => {
      second.child.once('exit', r);
      second.child.kill('SIGTERM');
    });
  });
});
