// npm run test:providers: installs the pinned provider CLIs (scripts/install-provider-clis.js), then runs
// test/providers/*.test.ts against them. SVC_PROVIDER_CLIS is set, so a CLI missing from the install fails its
// suite instead of skipping it.
import { spawnSync } from 'node:child_process';
import { dirname } from 'node:path';

const install = spawnSync(process.execPath, ['scripts/install-provider-clis.js'], {
  stdio: ['ignore', 'pipe', 'inherit'],
  encoding: 'utf8',
});
if (install.status !== 0) process.exit(install.status ?? 1);
const bin = install.stdout.trim().split('\n').pop();
// cli-run.ts looks for <SVC_PROVIDER_CLIS>/node_modules/.bin.
const env = { ...process.env, SVC_PROVIDER_CLIS: dirname(dirname(bin)) };
// Arguments narrow the run like scripts/test.js's (e.g. `npm run test:providers -- gemini`).
const filters = process.argv.length > 2 ? process.argv.slice(2) : ['test/providers/'];
const tests = spawnSync(process.execPath, ['scripts/test.js', ...filters], {
  stdio: 'inherit',
  env,
});
process.exit(tests.status ?? 1);
