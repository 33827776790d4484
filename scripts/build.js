// npm run build: a clean dist/ compiled by tsc, with dist/cli.js executable — `npm link` points the global `svc`
// at it, and tsc writes every file 0644, so a rebuild would otherwise leave the linked command "Permission denied".
import { spawnSync } from 'node:child_process';
import { chmodSync, rmSync } from 'node:fs';

rmSync('dist', { recursive: true, force: true });
const tsc = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json'],
  { stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
chmodSync('dist/cli.js', 0o755);
