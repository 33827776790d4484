// Loaded by scripts/test.js into each test file's process (node --test --import): a HOME and a TMPDIR of that file's
// own inside the suite's, so whatever a test leaves in the HOME it inherited (a svc or a browser it started without a
// HOME of the test's) or in the temp dir (a folder it or its children made and never removed) names the file.
import { mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';

const file = process.argv[1];
if (file?.endsWith('.test.ts')) {
  for (const name of ['HOME', 'TMPDIR'].filter((n) => process.env[n])) {
    process.env[name] = join(process.env[name], relative(process.cwd(), file).replaceAll('/', '+'));
    mkdirSync(process.env[name]);
  }
}
