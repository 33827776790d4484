// Every git svc runs has a time limit, the ones that talk to a remote too: a remote that accepts the connection and
// never answers ends in a typed error naming the git, which fails the run as svc's side (infra), not the agent's.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { git, GitTimeoutError, gitTimeoutMs } from '../../src/engine/git.ts';
import { failureOf } from '../../src/engine/run-state.ts';

describe('a git to a remote that never answers', () => {
  let root: string;
  let server: Server;
  let url: string;
  const sockets: Socket[] = [];

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'svc-silent-remote-'));
    // Accepts and reads, never writes. The kernel completes the connection even while the synchronous git holds the
    // event loop, so git waits on its request for ever.
    server = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    url = `http://127.0.0.1:${port}/acme/api.git`;
  });
  after(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('gives a git that talks to a remote or makes a worktree 15 minutes, past its -c settings, any other 120 s', () => {
    assert.equal(gitTimeoutMs(['-c', 'credential.useHttpPath=true', 'push', '--quiet', url]), 15 * 60_000);
    assert.equal(gitTimeoutMs(['-c', 'fetch.unpackLimit=1', 'fetch', url]), 15 * 60_000);
    // A checkout or removal of a whole large tree is slow without being stuck.
    assert.equal(gitTimeoutMs(['-c', 'filter.lfs.smudge=', 'worktree', 'add', '-b', 'b', 'p', 'HEAD']), 15 * 60_000);
    assert.equal(gitTimeoutMs(['worktree', 'remove', '--force', '--force', 'p']), 15 * 60_000);
    assert.equal(gitTimeoutMs(['rev-parse', 'HEAD']), 120_000);
  });

  for (const args of [['ls-remote'], ['fetch', '--quiet']]) {
    it(`ends git ${args[0]} after its time limit with a GitTimeoutError naming it, an infra failure`, () => {
      git(root, ['init', '--quiet', '--bare', join(root, 'r.git')]);
      let caught: unknown = null;
      try {
        git(root, [...args, url, 'refs/heads/main'], { GIT_DIR: join(root, 'r.git') }, undefined, [], 1000);
      } catch (err) {
        caught = err;
      }
      assert.ok(caught instanceof GitTimeoutError, `not a GitTimeoutError: ${String(caught)}`);
      // Only the time limit's kill makes this error: the server never answers, so git ended by no other way.
      assert.match(caught.message, new RegExp(`^git ${args[0]} did not end within its time limit in `));
      assert.equal(failureOf(caught).class, 'infra');
    });
  }
});
