// Runs every test: type-checks tests and sources, then node:test over test/**/*.test.ts (sources run directly).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function collect(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) collect(full, out);
    else if (name.endsWith('.test.ts')) out.push(full);
  }
  return out.sort();
}

const filter = process.argv.slice(2);
const files = collect('test').filter((f) => filter.length === 0 || filter.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}

const tsc = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.test.json'], { stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
// The UI is plain JS with // @ts-check and JSDoc: checkJs covers it without a build step.
const tscUi = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.static.json'], { stdio: 'inherit' });
if (tscUi.status !== 0) process.exit(tscUi.status ?? 1);

const result = spawnSync(
  process.execPath,
  ['--disable-warning=ExperimentalWarning', '--test', '--test-concurrency=2', '--test-timeout=120000', '--test-reporter=spec', ...files],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
