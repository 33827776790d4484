// Installs the provider CLIs pinned in test/providers/versions.json for the conformance suite. They are not
// dependencies of svc (not even dev ones): npm puts them in a cache folder outside the repo, keyed by a hash of the
// pins, so changing a pin installs afresh and an unchanged one is skipped. Prints the folder holding their bins.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pinsText = readFileSync(join(root, 'test', 'providers', 'versions.json'), 'utf8');
const pins = JSON.parse(pinsText);
const hash = createHash('sha256').update(pinsText).digest('hex').slice(0, 16);
const cacheHome = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
const dir = join(cacheHome, 'svc-provider-clis', hash);
const bin = join(dir, 'node_modules', '.bin');
// Written last, so an install cut short is redone rather than trusted.
const done = join(dir, '.installed');

if (!existsSync(done)) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'svc-provider-clis', private: true }) + '\n');
  const specs = Object.entries(pins).map(([name, version]) => `${name}@${version}`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const args = ['install', '--no-audit', '--no-fund', '--save-exact', '--prefix', dir, ...specs];
  const r = spawnSync(npm, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) {
    console.error(`npm install of the provider CLIs failed (exit ${r.status}); nothing marked installed in ${dir}`);
    process.exit(r.status || 1);
  }
  writeFileSync(done, pinsText);
}
console.log(bin);
