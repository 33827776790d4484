// No route out but the gate (DESIGN §7a), black-box: a host server's Unix socket file in a folder the sandbox sees
// (a devenv's Postgres in the checkout, git's fsmonitor daemon in .git) is a door no network namespace closes. A real
// `svc start` without --worktree, so the agent works in the checkout itself, whose `command` provider knocks on both
// with node and with python; and looks for what brought the gate in (its IPC channel) in its own descriptors and
// environment.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type Server } from 'node:net';
import { makeRepo, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';

/** node is shown in the sandbox (the gate's port program runs on it); each knock's outcome goes into knock.txt. */
const KNOCK = `#!/bin/sh
cat > /dev/null
# What the agent hands on to whatever it runs: its descriptors past stdio (ls adds its own, a directory).
ls -l /proc/self/fd > fds.txt 2> /dev/null
node=${JSON.stringify(realpathSync(process.execPath))}
{
  for path in "$PWD/devenv.sock" "$PWD/.git/fsmonitor--daemon.ipc"; do
    name=$(basename "$path")
    "$node" -e 'const s = require("node:net").connect(process.argv[1]);
      s.on("connect", () => { console.log("connected"); s.end(); });
      s.on("error", (e) => console.log(e.code));' "$path" | sed "s/^/node-$name:/"
    /usr/bin/python3 -c '
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("connected")
except OSError as e:
    print(e.__class__.__name__)' "$path" | sed "s/^/python-$name:/"
  done
  echo "channel:\${NODE_CHANNEL_FD-unset}:\${NODE_CHANNEL_SERIALIZATION_MODE-unset}"
} > knock.txt 2>&1
exit 0
`;

const skip = bwrapWorks ? false : 'bwrap cannot run on this host';

describe('a sandboxed agent and the host\'s Unix sockets', { skip }, () => {
  let repo: TestRepo;
  const servers: Server[] = [];
  let seen = 0;

  /** A host server on a socket file the agent can name; it counts every connection. */
  async function serveAt(path: string): Promise<void> {
    const server = createServer((socket) => {
      seen += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    chmodSync(path, 0o777);
    servers.push(server);
  }

  before(async () => {
    repo = makeRepo({ providers: { knock: KNOCK } });
    await serveAt(join(repo.repo, 'devenv.sock'));
    await serveAt(join(repo.repo, '.git', 'fsmonitor--daemon.ipc'));
  });
  after(async () => {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    repo.cleanup();
  });

  it('cannot connect to a socket file in its checkout or in .git, and holds nothing of the gate\'s channel',
    async () => {
      const env: NodeJS.ProcessEnv = {
        ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      };
      delete env.SVC_SANDBOX;
      const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'knock', '--provider', 'knock'],
        { cwd: repo.repo, env });
      assert.equal(res.code, 0, res.stderr);
      const knock = readFileSync(join(repo.repo, 'knock.txt'), 'utf8');
      for (const name of ['devenv.sock', 'fsmonitor--daemon.ipc']) {
        assert.match(knock, new RegExp(`^node-${name}:EPERM$`, 'm'), knock);
        assert.match(knock, new RegExp(`^python-${name}:PermissionError$`, 'm'), knock);
      }
      assert.equal(seen, 0, 'no host server saw a connection');
      assert.match(knock, /^channel:unset:unset$/m, 'the agent sees no IPC channel variable');
      const fds = readFileSync(join(repo.repo, 'fds.txt'), 'utf8');
      assert.match(fds, / 1 -> /, fds);
      const sockets = [...fds.matchAll(/ (\d+) -> socket:/g)].map((m) => Number(m[1]));
      assert.deepEqual(sockets.filter((fd) => fd > 2), [], `the agent holds no socket beyond its stdio: ${fds}`);
    });
});
