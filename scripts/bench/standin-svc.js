// Stand-in for `svc` under the trigger server during the bench (SVC_TRIGGER_CLI): `start … --detach`
// records a run that stays "running" forever and prints its {"source","run"} line, like the real launcher,
// so the server keeps exactly its concurrency's worth of jobs running while webhooks arrive.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

const [command] = process.argv.slice(2);
if (command !== 'start') {
  process.stderr.write(`bench stand-in: unsupported command "${command}"\n`);
  process.exit(2);
}
const run = `r${Date.now().toString(32)}${randomBytes(8).toString('hex')}`;
const dir = join(process.cwd(), '.svc', 'runs', run);
mkdirSync(dir, { recursive: true });
const now = new Date().toISOString();
const state = { source: 'local', run, status: 'running', verdict: null, started_at: now, updated_at: now };
writeFileSync(join(dir, 'state.json'), JSON.stringify(state));
process.stdout.write(`${JSON.stringify({ source: 'local', run })}\n`);
