// `npm run bundle`: the one-folder install. Builds svc-<version>/ (dist, static, trimmed package.json, LICENSE,
// README.md, docs, deploy scripts, bin/svc) plus svc-<version>.tar.gz and its .sha256. Needs `npm run build` first
// (the npm script does it).
// Usage: node scripts/bundle.js [--out DIR] [--with-node]   (default: the repository root)
// Progress goes to stderr, one line a step (compressing the pinned Node takes 10-30 s); stdout keeps only the result.
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { tarGz } from './tar.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const LAUNCHER = `#!/bin/sh
# svc launcher for the one-folder install: finds node and runs ../dist/cli.js, which checks Node >= 22.13 itself.
# Node is taken from SVC_NODE, then <folder>/node/bin/node if you put a runtime there, then PATH.
self=$0
while [ -L "$self" ]; do
  link=$(readlink "$self")
  case $link in
    /*) self=$link ;;
    *) self=$(dirname "$self")/$link ;;
  esac
done
root=$(cd "$(dirname "$self")/.." && pwd -P) || exit 1
node=\${SVC_NODE:-}
if [ -z "$node" ] && [ -x "$root/node/bin/node" ]; then node=$root/node/bin/node; fi
if [ -z "$node" ]; then node=$(command -v node 2>/dev/null) || node=; fi
if [ -z "$node" ]; then
  echo "svc: node not found: install Node.js >= 22.13, put it on PATH, or set SVC_NODE" >&2
  exit 1
fi
exec "$node" "$root/dist/cli.js" "$@"
`;

function trimmedPackage(pkg) {
  // Only what a runtime needs: no devDependencies, no npm scripts that assume a source checkout.
  const keep = ['name', 'version', 'description', 'license', 'type', 'bin', 'exports'];
  const out = Object.fromEntries(keep.filter((k) => pkg[k] !== undefined).map((k) => [k, pkg[k]]));
  // The checkout declares no engines (its devDependency `node` is the runtime, and npm would warn about the system
  // Node that only runs npm); a bundle runs on whatever Node it finds, so it says which (src/cli.ts checks too).
  out.engines = { node: '>=22.13' };
  if (pkg.dependencies && Object.keys(pkg.dependencies).length) {
    throw new Error('package.json has runtime dependencies; the bundle would need npm install');
  }
  return out;
}

/** Size of a file in MB, for progress lines. */
function megabytes(path) {
  return Math.round(statSync(path).size / 1e6);
}

export function bundle(outDir, { withNode = false, say = () => {} } = {}) {
  const started = Date.now();
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  if (!existsSync(join(ROOT, 'dist', 'cli.js'))) throw new Error('dist/cli.js is missing: run npm run build first');
  const name = `svc-${pkg.version}`;
  const folder = join(outDir, name);
  rmSync(folder, { recursive: true, force: true });
  say(`bundle: copying dist, static, docs and deploy files into ${folder}`);
  mkdirSync(join(folder, 'bin'), { recursive: true });
  cpSync(join(ROOT, 'dist'), join(folder, 'dist'), { recursive: true });
  cpSync(join(ROOT, 'static'), join(folder, 'static'), { recursive: true });
  for (const file of ['LICENSE', 'README.md']) cpSync(join(ROOT, file), join(folder, file));
  // Deploy files travel with the folder so an air-gapped host can install the units or build the image.
  for (const rel of ['docs', 'scripts/run.sh', 'scripts/systemd', 'scripts/container', 'scripts/k8s']) {
    if (existsSync(join(ROOT, rel))) cpSync(join(ROOT, rel), join(folder, rel), { recursive: true });
  }
  writeFileSync(join(folder, 'package.json'), `${JSON.stringify(trimmedPackage(pkg), null, 2)}\n`);
  if (withNode) {
    // The pinned runtime (the `node` devDependency), where the launcher looks before PATH.
    const runtime = join(ROOT, 'node_modules', 'node', 'bin', 'node');
    if (!existsSync(runtime)) throw new Error('node_modules/node/bin/node is missing: run npm ci first');
    say(`bundle: copying the pinned Node from node_modules/node (${megabytes(runtime)} MB)`);
    mkdirSync(join(folder, 'node', 'bin'), { recursive: true });
    cpSync(runtime, join(folder, 'node', 'bin', 'node'));
    chmodSync(join(folder, 'node', 'bin', 'node'), 0o755);
  }
  writeFileSync(join(folder, 'bin', 'svc'), LAUNCHER);
  chmodSync(join(folder, 'bin', 'svc'), 0o755);
  chmodSync(join(folder, 'dist', 'cli.js'), 0o755);
  // SOURCE_DATE_EPOCH (reproducible-builds.org) pins entry times; otherwise 0 keeps the archive reproducible.
  const mtime = Number(process.env.SOURCE_DATE_EPOCH) || 0;
  const slow = withNode ? ' (gzip -9 of the Node binary: the slow step, 10-30 s)' : '';
  say(`bundle: compressing ${name}.tar.gz${slow}`);
  const archive = tarGz(outDir, name, mtime);
  const tarPath = join(outDir, `${name}.tar.gz`);
  writeFileSync(tarPath, archive);
  const digest = createHash('sha256').update(archive).digest('hex');
  writeFileSync(`${tarPath}.sha256`, `${digest}  ${name}.tar.gz\n`);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  say(`bundle: done in ${seconds} s, ${name}.tar.gz is ${megabytes(tarPath)} MB`);
  return { folder, tarPath, sha256: digest };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { out: { type: 'string' }, 'with-node': { type: 'boolean' } } });
  const outDir = resolve(values.out ?? ROOT);
  mkdirSync(outDir, { recursive: true });
  const say = (line) => process.stderr.write(`${line}\n`);
  const result = bundle(outDir, { withNode: values['with-node'] === true, say });
  process.stdout.write(`${result.folder}\n${result.tarPath}\nsha256 ${result.sha256}\n`);
}
