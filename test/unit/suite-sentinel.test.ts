// The suite's own guards (scripts/test.js): a test that reaches the default Control Plane port, or a svc it spawns
// that falls back to the default port, fails the run, naming the test file; so does one that writes to the HOME it
// inherits (that HOME is never the user's here, but would be outside the runner).
// The runner runs here on a checkout of three test files in a temp dir, inside a network namespace of its own, so
// its guard holds 127.0.0.1:47821 there and never meets the outer suite's guard or the user's Control Plane. The two
// fixtures that connect first check they are in another namespace than this file, and refuse to run if not.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';

const ROOT = process.cwd();
const CLI = join(ROOT, 'dist', 'cli.js');
const dir = mkdtempSync(join(tmpdir(), 'svc-suite-sentinel-'));
const USER_HOME = join(dir, 'user-home');
/** This file's network namespace ('' off Linux, where bwrap and so the test are skipped). */
const OUTER_NET = (() => {
  try {
    return readlinkSync('/proc/self/ns/net');
  } catch {
    return '';
  }
})();
// Loaded first by the fixtures that connect: outside a namespace of their own, 47821 may be the user's Control Plane.
const ONLY_INSIDE = `import { readlinkSync } from 'node:fs';
if (readlinkSync('/proc/self/ns/net') === ${JSON.stringify(OUTER_NET)}) {
  throw new Error('not in a network namespace of its own');
}
`;

const FIXTURES: Record<string, string> = {
  // Reaches 127.0.0.1:47821 itself; swallows the answer, so only the guard can fail the run.
  'reaches.test.ts': `${ONLY_INSIDE}import { it } from 'node:test';
it('asks the default port', async () => {
  await fetch('http://127.0.0.1:47821/v1/runs').catch(() => undefined);
});
`,
  // Spawns svc with no Control Plane named: it falls back to the default port, which the runner points at a guard.
  'falls-back.test.ts': `${ONLY_INSIDE}import { it } from 'node:test';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
it('runs svc with no Control Plane named', async () => {
  const child = spawn(process.execPath, [${JSON.stringify(CLI)}, 'runs', 'list'], { stdio: 'ignore' });
  await once(child, 'close');
});
`,
  // Reaches nothing; leaves a file in the HOME it was given, as a svc started without a HOME of its own would.
  'leaves-home.test.ts': `import { it } from 'node:test';
import { writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
it('leaves a file in its HOME', () => writeFileSync(join(homedir(), '.left-behind'), ''));
`,
  // Reaches nothing; writes to the suite's HOME above its own, as a process given the suite's HOME would: an empty
  // folder, and a folder named as no test file's HOME is.
  'strays.test.ts': `import { it } from 'node:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
it('writes beside its HOME', () => {
  mkdirSync(join(dirname(homedir()), '.cache'));
  mkdirSync(join(dirname(homedir()), '.svc'));
  writeFileSync(join(dirname(homedir()), '.svc', 'server.json'), '');
});
`,
  // Reaches nothing; leaves a folder in its temp dir, and so does a child it starts (os.tmpdir() reads TMPDIR).
  'leaves-tmp.test.ts': `import { it } from 'node:test';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
it('leaves folders in its temp dir', () => {
  mkdirSync(join(tmpdir(), 'svc-left'));
  const child = "require('node:fs').mkdirSync(require('node:path').join(require('node:os').tmpdir(), 'svc-child'))";
  execFileSync(process.execPath, ['-e', child]);
});
`,
  // Reaches nothing; leaves a timer running after its test, which would keep its process alive forever.
  'holds.test.ts': `import { it } from 'node:test';
it('starts a timer it never stops', () => {
  setInterval(() => {}, 1000);
});
`,
  // Reaches nothing; its own clean-up outlasts the runner's grace (1 s in the test below), which counts only after it.
  'cleans-slowly.test.ts': `import { after, it } from 'node:test';
after(() => new Promise((resolve) => setTimeout(resolve, 2_500)));
it('closes what it started slowly', () => {});
`,
  // Reaches nothing; sees the suite's HOME, not the one the runner was started with.
  'quiet.test.ts': `import { it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
it('finds no token of the user', () => {
  assert.notEqual(homedir(), ${JSON.stringify(USER_HOME)});
  assert.equal(existsSync(join(homedir(), '.svc', 'control', 'token')), false, homedir());
});
`,
};

describe('the test runner guard', () => {
  before(() => {
    const checkout = join(dir, 'checkout');
    mkdirSync(join(checkout, 'test'), { recursive: true });
    for (const [name, text] of Object.entries(FIXTURES)) writeFileSync(join(checkout, 'test', name), text);
    symlinkSync(join(ROOT, 'node_modules'), join(checkout, 'node_modules'));
    const tsconfig = JSON.stringify({
      compilerOptions: { module: 'nodenext', target: 'es2022', strict: true, noEmit: true, types: ['node'] },
      include: ['test'],
    });
    writeFileSync(join(checkout, 'tsconfig.test.json'), tsconfig);
    writeFileSync(join(checkout, 'tsconfig.static.json'), tsconfig);
    // The user's home the runner is started from, with a Control Plane token a careless test could read.
    mkdirSync(join(USER_HOME, '.svc', 'control'), { recursive: true });
    writeFileSync(join(USER_HOME, '.svc', 'control', 'token'), 'users-own-token\n');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const skip = { skip: bwrapWorks ? false : 'bwrap cannot run here (a network namespace of its own holds 47821)' };
  /** The runner on the fixtures whose names hold one of `files`, started from the user's HOME in a new namespace. */
  const runner = (...files: string[]) => runnerWith({}, ...files);
  const runnerWith = (extra: NodeJS.ProcessEnv, ...files: string[]) => {
    const inside = [process.execPath, join(ROOT, 'scripts', 'test.js'), ...files];
    const bwrap = ['--dev-bind', '/', '/', '--unshare-net', '--die-with-parent', '--', ...inside];
    // Its temp dir is this test's folder: the runner's tsc keeps its compile cache there (node-compile-cache).
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: USER_HOME, TMPDIR: dir, ...extra };
    delete env.NODE_TEST_CONTEXT; // set for a test file's children: a node --test there would run nothing
    return runChild('bwrap', bwrap, { env, cwd: join(dir, 'checkout') });
  };

  it('fails a run whose tests reach the default port or its fallback, naming each', skip, async () => {
    const r = await runner('reaches', 'falls-back', 'quiet');
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /✔ asks the default port/);
    assert.match(r.stdout, /✔ runs svc with no Control Plane named/);
    assert.match(r.stdout, /✔ finds no token of the user/);
    assert.match(r.stderr, /tests reached a Control Plane they did not start \(2\):/);
    assert.match(r.stderr, /^ {2}test\/reaches\.test\.ts → 47821: GET \/v1\/runs HTTP\/1\.1$/m);
    assert.match(r.stderr, /^ {2}test\/falls-back\.test\.ts → \d+: GET \/v1\/runs\S* HTTP\/1\.1$/m);
    // The svc it spawned wrote its compile cache to the HOME it inherited, which the note names.
    assert.match(r.stderr, /^ {2}test\/falls-back\.test\.ts: ~\/\.svc$/m);
    assert.doesNotMatch(r.stderr, /quiet/);
    assert.doesNotMatch(r.stderr, /in use/, 'the namespace leaves 47821 free for the guard');
    assert.deepEqual(readdirSync(join(USER_HOME, '.svc', 'control')), ['token']);
  });

  it('fails a run whose test left files in its HOME and names what one left in its temp dir', skip, async () => {
    const r = await runner('leaves-home', 'strays', 'leaves-tmp', 'quiet');
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /✔ leaves a file in its HOME/);
    assert.match(r.stdout, /✔ writes beside its HOME/);
    assert.match(r.stderr, /^✖ tests wrote to the HOME they inherited \(yours, outside this runner\) \(3\):$/m);
    assert.match(r.stderr, /^ {2}test\/leaves-home\.test\.ts: ~\/\.left-behind$/m);
    // Written at the top of the suite's HOME, so by no file that can be told; an empty folder counts too.
    assert.match(r.stderr, /^ {2}\(test file unknown\): ~\/\.cache$/m);
    assert.match(r.stderr, /^ {2}\(test file unknown\): ~\/\.svc$/m);
    const tmp = /^note: tests left in the temp dir they inherited \(the system's\) \(1\)/m;
    assert.match(r.stderr, tmp);
    assert.match(r.stderr, /^ {2}test\/leaves-tmp\.test\.ts: \$TMPDIR\/svc-child, \$TMPDIR\/svc-left$/m);
    assert.doesNotMatch(r.stderr, /quiet|reached/);
    assert.deepEqual(readdirSync(USER_HOME), ['.svc']);
  });

  // Before, node --test waited for such a file's process forever, and so did the suite (this test timed out).
  it('fails a run whose test file is still running after its last test, naming what holds it', skip, async () => {
    const r = await runnerWith({ SVC_TEST_HELD_MS: '1000' }, 'holds', 'quiet', 'cleans-slowly');
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /✔ starts a timer it never stops/);
    assert.match(r.stdout, /✔ closes what it started slowly/);
    assert.match(r.stdout, /✔ finds no token of the user/);
    const output = r.stdout + r.stderr;
    assert.match(output, /✖ test\/holds\.test\.ts: still running 1 s after its last test, held by: .*Timeout/);
    assert.doesNotMatch(output, /(quiet|cleans-slowly)\.test\.ts: still running/);
  });
});
