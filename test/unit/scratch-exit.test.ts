// A scratch folder (svc-paths.ts withScratch) must not outlive its process, even one a signal ends with process.exit
// while the call that made it still runs: as run-context.ts exitNow ends an --open-pr during its push, whose
// askpass folder (git-token.ts) and push folder (git-push.ts) are both scratch. A real child, its own TMPDIR.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SVC_PATHS = new URL('../../src/spawn/svc-paths.ts', import.meta.url).pathname;

describe('withScratch', () => {
  let tmp: string;
  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'svc-scratch-exit-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('removes the folders of calls still running when a signal handler ends the process with process.exit',
    async () => {
      // Two nested calls, as the push's folder is made inside the askpass one; the handler exits as exitNow does.
      const script = `import { withScratch } from ${JSON.stringify(SVC_PATHS)};\n` +
        `process.on('SIGTERM', () => process.exit(1));\n` +
        `await withScratch('askpass', (a) => withScratch('push', (p) => {\n` +
        `  process.stdout.write(a + '\\n' + p + '\\n');\n` +
        `  return new Promise(() => setInterval(() => {}, 1000));\n` +
        `}));\n`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script],
        { env: { ...process.env, TMPDIR: tmp }, stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = once(child, 'exit');
      let said = '';
      child.stdout.setEncoding('utf8');
      for await (const chunk of child.stdout) {
        said += chunk as string;
        if (said.split('\n').length > 2) break;
      }
      const made = said.trim().split('\n');
      try {
        assert.equal(made.length, 2, said);
        for (const dir of made) assert.ok(existsSync(dir), `${dir} is there while its call runs`);
        child.kill('SIGTERM');
        assert.deepEqual(await exited, [1, null]);
        assert.deepEqual(readdirSync(tmp), [], 'no scratch folder is left');
      } finally {
        child.kill('SIGKILL');
      }
    });
});
