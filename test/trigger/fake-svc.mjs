#!/usr/bin/env node
// Stand-in for `svc` in trigger tests: records argv and env under $HOME/fake-svc, then behaves like `svc start --detach`.
import { mkdirSync, writeFileSync, readFileSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

const args = process.argv.slice(2);
const text = args.join(' ');
const out = join(process.env.HOME ?? '/tmp', 'fake-svc');
mkdirSync(out, { recursive: true });
// Like svc, it takes what the server handed over on fd 3 (secrets, never in its environment) and records it.
let handed = null;
if (process.env.SVC_HANDOFF_FD === '3') {
  handed = JSON.parse(readFileSync(3, 'utf8'));
  closeSync(3);
}
writeFileSync(join(out, `call-${Date.now()}-${process.pid}.json`), JSON.stringify({ args, env: process.env, cwd: process.cwd(), handed }));

if (text.includes('hang-forever')) {
  writeFileSync(join(out, 'hang.pid'), String(process.pid));
  setInterval(() => {}, 1 << 30);
} else if (text.includes('launch-fail')) {
  process.stderr.write('provider not found\n');
  process.exit(3);
} else {
  const run = `r${randomBytes(13).toString('hex')}`;
  const dir = join(process.cwd(), '.svc', 'runs', run);
  mkdirSync(dir, { recursive: true });
  const now = new Date().toISOString();
  const running = text.includes('stay-running');
  // A run whose error carries vendor markup (issue 21): every run in a project holding this file fails with its text.
  let hostile = null;
  try {
    hostile = readFileSync(join(process.cwd(), '.svc', 'fake-run-error.txt'), 'utf8');
  } catch {
    // an ordinary run
  }
  const state = {
    source: process.env.SVC_SOURCE || 'local',
    run,
    status: running ? 'running' : hostile ? 'failed' : 'succeeded',
    verdict: running ? null : 'verified',
    pr_url: running ? null : 'https://git.example.test/acme/api/pull/7',
    cost_usd: running ? null : 0.42,
    started_at: now,
    ended_at: running ? null : now,
    error: hostile,
    // A run its worker started over once after an infra failure (src/engine/worker.ts), as its state.json says.
    ...(text.includes('infra-retried') ? { infra_retries: 1 } : {}),
  };
  writeFileSync(join(dir, 'state.json'), JSON.stringify(state));
  process.stdout.write(`${JSON.stringify({ source: state.source, run })}\n`);
}
