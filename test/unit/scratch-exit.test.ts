// A scratch folder (svc-paths.ts withScratch) must not outlive its process, even one a signal ends with process.exit
// while the call that made it still runs: as run-context.ts exitNow ends an --open-pr during its push, whose
// askpass folder (git-token.ts) and push folder (git-push.ts) are both scratch. One a SIGKILL ends can remove nothing:
// the next call, of any process, removes it. Real children, their own TMPDIR.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

const SVC_PATHS = new URL('../../src/spawn/svc-paths.ts', import.meta.url).pathname;

// Two nested calls that never settle, as the push's folder is made inside the askpass one; it prints both folders.
const PUSHING = `import { withScratch } from ${JSON.stringify(SVC_PATHS)};\n` +
  `process.on('SIGTERM', () => process.exit(1));\n` +
  `await withScratch('askpass', (a) => withScratch('push', (p) => {\n` +
  `  process.stdout.write(a + '\\n' + p + '\\n');\n` +
  `  return new Promise(() => setInterval(() => {}, 1000));\n` +
  `}));\n`;

/** A child in PUSHING's two calls, its TMPDIR `tmp`, once it has printed its two folders. */
async function pushing(tmp: string) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', PUSHING],
    { env: { ...process.env, TMPDIR: tmp }, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  let said = '';
  child.stdout.setEncoding('utf8');
  for await (const chunk of child.stdout) {
    said += chunk as string;
    if (said.split('\n').length > 2) break;
  }
  return { child, exited, made: said.trim().split('\n') };
}

describe('withScratch', () => {
  let tmp: string;
  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'svc-scratch-exit-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('removes the folders of calls still running when a signal handler ends the process with process.exit',
    async () => {
      const { child, exited, made } = await pushing(tmp);
      try {
        assert.equal(made.length, 2, made.join('\n'));
        for (const dir of made) assert.ok(existsSync(dir), `${dir} is there while its call runs`);
        child.kill('SIGTERM');
        assert.deepEqual(await exited, [1, null]);
        assert.deepEqual(readdirSync(tmp), [], 'no scratch folder is left');
      } finally {
        child.kill('SIGKILL');
      }
    });

  it('removes, at its next call in any process, the folders of a SIGKILLed process, never a live one\'s or a link',
    async () => {
      const killed = await pushing(tmp);
      const live = await pushing(tmp);
      try {
        killed.child.kill('SIGKILL');
        assert.deepEqual(await killed.exited, [null, 'SIGKILL']);
        for (const dir of killed.made) assert.ok(existsSync(dir), `${dir} outlives the process a SIGKILL ended`);
        // A link named as the dead process's folder would be: what it points to is not svc's to remove.
        const kept = join(tmp, 'kept');
        mkdirSync(kept);
        writeFileSync(join(kept, 'file'), 'mine');
        const link = join(tmp, basename(killed.made[1]!).replace(/.{6}$/, 'linkxx'));
        symlinkSync(kept, link);
        const next = spawn(process.execPath, ['--input-type=module', '-e',
          `import { withScratch } from ${JSON.stringify(SVC_PATHS)};\nwithScratch('diff', () => {});\n`],
        { env: { ...process.env, TMPDIR: tmp }, stdio: 'inherit' });
        assert.deepEqual(await once(next, 'exit'), [0, null]);
        const left = [...live.made.map((dir) => basename(dir)), basename(link), 'kept'];
        assert.deepEqual(readdirSync(tmp).sort(), left.sort(), 'only the SIGKILLed process\'s folders are gone');
        assert.ok(existsSync(join(kept, 'file')), 'a link is never followed');
      } finally {
        killed.child.kill('SIGKILL');
        live.child.kill('SIGKILL');
      }
      assert.deepEqual(await live.exited, [null, 'SIGKILL']);
    });
});
