#!/usr/bin/env node
// Stand-in for `svc` in trigger tests: records argv and env under $HOME/fake-svc, then behaves like `svc start --detach`.
import { mkdirSync, writeFileSync, readFileSync, closeSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

const args = process.argv.slice(2);
const text = args.join(' ');
const out = join(process.env.HOME ?? '/tmp', 'fake-svc');
mkdirSync(out, { recursive: true });
// Like svc, it takes what the server handed over on fd 3 (secrets, never in its environment) and records it; an
// empty pipe (a launch withdrawn before its word) ends it here, recording nothing, as svc refuses to go on.
let handed = null;
if (process.env.SVC_HANDOFF_FD === '3') {
  handed = JSON.parse(readFileSync(3, 'utf8'));
  closeSync(3);
}
writeFileSync(join(out, `call-${Date.now()}-${process.pid}.json`), JSON.stringify({ args, env: process.env, cwd: process.cwd(), handed }));

if (args[0] === 'answer') {
  // `svc answer --repo DIR -- <source>/<run> <text>`: like svc, refuses a run that is not blocked; a blocked one takes
  // the answer and (standing in for the worker that picks it up) continues to the end.
  const dir = args[args.indexOf('--repo') + 1];
  const [ref, answer] = args.slice(args.indexOf('--') + 1);
  const run = ref.split('/')[1];
  const path = join(dir, '.svc', 'runs', run, 'state.json');
  const state = JSON.parse(readFileSync(path, 'utf8'));
  if (state.status !== 'blocked') {
    // Like svc --origin: the typed reason on stdout; the message (here naming an internal address) on stderr.
    process.stdout.write('origin-refusal: not_blocked\n');
    const where = '(cp.internal.test:8080)';
    process.stderr.write(`svc: Run ${ref} is ${state.status}, not blocked ${where}: nothing to answer\n`);
    process.exit(1);
  }
  const now = new Date().toISOString();
  const ended = { ...state, status: 'succeeded', question: null, answers: [answer], verdict: 'verified',
    pr_url: 'https://git.example.test/acme/api/pull/8', cost_usd: 0.5, ended_at: now };
  writeFileSync(`${path}.tmp`, JSON.stringify(ended));
  renameSync(`${path}.tmp`, path);
} else if (text.includes('hang-forever')) {
  // Whole or not at all: a test reads the pid as soon as the file exists.
  writeFileSync(join(out, 'hang.pid.tmp'), String(process.pid));
  renameSync(join(out, 'hang.pid.tmp'), join(out, 'hang.pid'));
  setInterval(() => {}, 1 << 30);
} else if (text.includes('launch-fail')) {
  // As cli.ts prints a command's error: its name first.
  process.stderr.write('svc start: provider not found\n');
  process.exit(3);
} else {
  // The run id the server chose (`--run-id`), as svc takes it.
  const run = args.includes('--run-id') ? args[args.indexOf('--run-id') + 1] : `r${randomBytes(13).toString('hex')}`;
  const dir = join(process.cwd(), '.svc', 'runs', run);
  mkdirSync(dir, { recursive: true });
  const now = new Date().toISOString();
  const running = text.includes('stay-running');
  // A run that blocks with a question (the agent asks): it waits until `svc answer` (above).
  const asks = text.includes('ask-question') || text.includes('trackera:ASKQ-');
  // A run whose error carries vendor markup: every run in a project holding this file fails with its text.
  let hostile = null;
  try {
    hostile = readFileSync(join(process.cwd(), '.svc', 'fake-run-error.txt'), 'utf8');
  } catch {
    // an ordinary run
  }
  const state = {
    source: process.env.SVC_SOURCE || 'local',
    run,
    status: asks ? 'blocked' : running ? 'running' : hostile ? 'failed' : 'succeeded',
    verdict: running || asks ? null : 'verified',
    pr_url: running || asks ? null : 'https://git.example.test/acme/api/pull/7',
    cost_usd: running || asks ? null : 0.42,
    started_at: now,
    ended_at: running || asks ? null : now,
    error: hostile,
    ...(asks ? { question: 'Which database should the <!here> migration target: `prod` or [staging](https://evil.example)?' } : {}),
    // A run its worker started over once after an infra failure (src/engine/worker.ts), as its state.json says.
    ...(text.includes('infra-retried') ? { infra_retries: 1 } : {}),
  };
  writeFileSync(join(dir, 'state.json'), JSON.stringify(state));
  process.stdout.write(`${JSON.stringify({ source: state.source, run })}\n`);
}
