// Runs every test: type-checks tests and sources, then node:test over test/**/*.test.ts (sources run directly).
// The suite runs with a HOME of its own and a guard on the user's Control Plane port: a test that forgets to give a
// server or CLI its own HOME and Control Plane URL must never reach the user's real ~/.svc or the Control Plane
// `npm start` left running on 127.0.0.1:47821. Reaching a guard, or leaving anything in the HOME it inherited, fails
// the run; what is left in the temp dir it inherited is named in a note.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { tempNameOf } from './test-home.js';

function collect(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) collect(full, out);
    else if (name.endsWith('.test.ts')) out.push(full);
  }
  return out.sort();
}

const USER_CONTROL_PORT = 47821;

/** A listener that records every connection made to it: no test may make one. Null when the port is taken. */
function sentinel(port) {
  const reached = [];
  const server = createServer((socket) => {
    // Looked up at once, while the client still waits for an answer and so still holds its end.
    const file = testFileOf(socket.remotePort, server.address().port);
    const entry = { port: server.address().port, file, line: '(no request sent)', where: '' };
    reached.push(entry);
    socket.once('data', (chunk) => {
      // The request line, and the brief of the run it is about (an ingest carries it): a second trail to the test.
      const text = chunk.toString('latin1');
      entry.line = text.split('\r\n')[0];
      entry.where = /"(?:brief|repo_path)":"([^"]{1,120})"/.exec(text)?.[1] ?? '';
      socket.end('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    });
    socket.on('error', () => {});
  });
  return new Promise((resolve) => {
    server.once('error', () => resolve(null));
    server.listen(port, '127.0.0.1', () => resolve({ server, reached, port: server.address().port }));
  });
}

/**
 * The test file behind a connection to a guard, from Linux's /proc: the process holding the client's end of the
 * socket, then its parents up to the one node --test started with a *.test.ts argument. '' when it cannot tell (not
 * Linux, or the client is already gone).
 */
function testFileOf(clientPort, guardPort) {
  const hex = (n) => `:${n.toString(16).toUpperCase().padStart(4, '0')}`;
  const read = (path) => {
    try {
      return readFileSync(path, 'latin1');
    } catch {
      return '';
    }
  };
  // /proc/net/tcp's columns: sl, local and remote address, state, queues, timers, retransmits, uid, timeout, inode.
  const row = read('/proc/net/tcp').split('\n').map((line) => line.trim().split(/\s+/))
    .find((f) => f[1]?.endsWith(hex(clientPort)) && f[2]?.endsWith(hex(guardPort)));
  if (!row) return '';
  const link = `socket:[${row[9]}]`;
  const holds = (pid) => {
    try {
      return readdirSync(`/proc/${pid}/fd`).some((fd) => readlinkSync(`/proc/${pid}/fd/${fd}`) === link);
    } catch {
      return false; // another user's process, or one that just ended
    }
  };
  let pid = readdirSync('/proc').find((name) => /^\d+$/.test(name) && holds(name));
  while (pid && pid !== '1' && pid !== String(process.pid)) {
    const file = read(`/proc/${pid}/cmdline`).split('\0').find((arg) => arg.endsWith('.test.ts'));
    if (file) return relative(process.cwd(), file);
    // The parent is the second field after the command name, which sits in parentheses and may hold any byte.
    const stat = read(`/proc/${pid}/stat`);
    pid = stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[1];
  }
  return '';
}

const filter = process.argv.slice(2);
const files = collect('test').filter((f) => filter.length === 0 || filter.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}

// The UI is plain JS with // @ts-check and JSDoc (tsconfig.static.json): checkJs covers it without a build step.
for (const project of ['tsconfig.test.json', 'tsconfig.static.json']) {
  const tsc = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', project], { stdio: 'inherit' });
  if (tsc.status !== 0) process.exit(tsc.status ?? 1);
}

// The user's port is guarded when free (always, in CI). Either way the default-port fallback of every svc the tests
// start with this environment goes to a second guard (SVC_CONTROL_PORT), and HOME is a folder made for this run.
const guards = [await sentinel(USER_CONTROL_PORT), await sentinel(0)].filter(Boolean);
if (guards.length < 2) {
  console.error(`note: 127.0.0.1:${USER_CONTROL_PORT} is in use (a Control Plane of yours?): tests that inherit this ` +
    'environment are kept off it; one that builds its own environment could still reach it unnoticed');
}
const home = mkdtempSync(join(tmpdir(), 'svc-test-home-'));
// The temp dir too (os.tmpdir() reads TMPDIR, and every child inherits it): what a test leaves there is named below.
// Open to all as /tmp is (test-home.js opens each file's too): tests run svc as nobody on repos they make there.
const temp = mkdtempSync(join(tmpdir(), 'svc-tmp-'));
chmodSync(temp, 0o1777);
const env = { ...process.env, HOME: home, TMPDIR: temp, SVC_CONTROL_PORT: String(guards.at(-1).port) };
delete env.SVC_CONTROL_URL;
delete env.SVC_CONTROL_TOKEN;

const child = spawn(
  process.execPath,
  ['--disable-warning=ExperimentalWarning', `--import=${join(import.meta.dirname, 'test-home.js')}`, '--test',
    '--test-concurrency=2', '--test-timeout=120000', '--test-reporter=spec', ...files],
  { stdio: 'inherit', env },
);
const status = await new Promise((resolve) => child.on('close', (code) => resolve(code ?? 1)));
for (const guard of guards) guard.server.close();
// What a test left in the HOME it inherited (a svc or browser it started without a HOME of the test's own) fails the
// run: outside this runner that HOME is the user's. What it left in its temp dir, which outside the runner is the
// system's, is named in a note: a folder a test removed while a detached worker still wrote in it was left half there
// (rmSync stops, with no error, at a file renamed away under it; tests now wait with fixtures.ts processesEnded), a
// different few on each run, so it does not yet fail the run. Each file's HOME and TMPDIR is
// a folder of its own (test-home.js); anything
// else at the top, even an empty folder, was made by a process that had the suite's, whose test file cannot be told.
// This looks once, after the last file ends: what a detached process writes after the look goes unseen, so such a
// writer may be caught on some runs only.
const fileOf = new Map(files.flatMap((f) => [[f.replaceAll('/', '+'), f], [tempNameOf(f), f]]));
// A folder a process still writes in can fail to go (ENOTEMPTY) even after retries: reported, not a crash.
const unremoved = [];
const leftIn = (root, failing = true) => {
  const left = readdirSync(root, { withFileTypes: true }).map((e) => e.isDirectory() && fileOf.has(e.name)
    ? [fileOf.get(e.name), readdirSync(join(root, e.name)).sort()]
    : ['(test file unknown)', [e.name]]).filter(([, names]) => names.length > 0);
  try {
    rmSync(root, { recursive: true, force: true, maxRetries: 5 });
  } catch (err) {
    const why = `${root} (${err.code ?? err}): a process the tests started may still write there`;
    if (failing) unremoved.push(why);
    else console.error(`note: could not remove ${why}`);
  }
  return left;
};
const left = [['the HOME they inherited (yours, outside this runner)', '~', leftIn(home)]];
const leftTemp = leftIn(temp, false);
const report = (lead, root, byFile) => {
  console.error(`\n${lead} (${byFile.length}):`);
  for (const [file, names] of byFile) console.error(`  ${file}: ${root}/${names.join(`, ${root}/`)}`);
};
for (const [what, root, byFile] of left.filter(([, , byFile]) => byFile.length > 0)) {
  report(`✖ tests wrote to ${what}`, root, byFile);
}
if (leftTemp.length > 0) report('note: tests left in the temp dir they inherited (the system\'s)', '$TMPDIR', leftTemp);
const reached = guards.flatMap((g) => g.reached);
if (reached.length > 0) {
  console.error(`\n✖ tests reached a Control Plane they did not start (${reached.length}):`);
  for (const { port, file, line, where } of reached.slice(0, 20)) {
    console.error(`  ${file || '(test file unknown)'} → ${port}: ${line}${where ? ` (${where})` : ''}`);
  }
}
if (unremoved.length > 0) console.error(`\n✖ could not remove:\n  ${unremoved.join('\n  ')}`);
const dirty = left.some(([, , byFile]) => byFile.length > 0) || unremoved.length > 0;
process.exit(reached.length > 0 || dirty ? 1 : status);
