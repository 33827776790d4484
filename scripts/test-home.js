// Loaded by scripts/test.js into each test file's process (node --test --import): a HOME of that file's own inside
// the suite's, so whatever a test leaves in the HOME it inherited (a svc or a browser it started without a HOME of
// the test's) names the file.
import { mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';

const file = process.argv[1];
if (file?.endsWith('.test.ts') && process.env.HOME) {
  process.env.HOME = join(process.env.HOME, relative(process.cwd(), file).replaceAll('/', '+'));
  mkdirSync(process.env.HOME);
}
