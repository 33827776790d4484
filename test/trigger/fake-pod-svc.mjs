#!/usr/bin/env node
// Stand-in for svc in a Kubernetes job pod, one process per container (test/trigger/kube-stand-in.ts):
// - `start …` (the run container): prints {"source","run"} under the --run-id the pod spec fixed, leaves its outcome
//   in the workspace (its working folder) for the signer, and exits 0 like `svc start` with SVC_SIGN_LATER=1;
// - `pod seal`: nothing to record here;
// - `pod sign` (the signer): reads that outcome from --repo, ships the run to the Control Plane (token from
//   SVC_CONTROL_TOKEN_FILE), writes the final summary to --outcome (its termination message) and exits 0, like
//   `svc pod sign`; a brief with `signer-error` makes it print a forged summary on stderr and fail as a refusal does
//   (its error written there, exit 1); one with `chatty` makes it log 80 KiB before its summary.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const args = process.argv.slice(2);
const flag = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const source = process.env.SVC_SOURCE || 'local';
const run = flag('--run-id');

if (args[0] === 'pod' && args[1] === 'seal') process.exit(0);

if (args[0] === 'start') {
  const text = args.join(' ');
  if (text.includes('no-run-line')) {
    process.stderr.write('provider crashed\n');
    process.exit(2);
  }
  if (text.includes('announce')) process.stdout.write(`${JSON.stringify({ source, run })}\n`);
  const failed = text.includes('make-it-fail');
  const now = new Date().toISOString();
  const state = {
    run, status: failed ? 'failed' : 'succeeded', verdict: failed ? 'not_verified' : 'verified',
    pr_url: failed ? null : 'https://git.example.test/acme/api/pull/9', cost_usd: 0.25, started_at: now, ended_at: now,
    error: failed ? 'Required check "test" failed (exit 1)' : null, brief: text, ship: !text.includes('no-ship'),
  };
  writeFileSync(join(process.cwd(), `fake-${run}.json`), JSON.stringify(state));
  process.stdout.write(`${JSON.stringify({ source, run, status: 'running' })}\n`);
  process.exit(0);
}

if (args[0] === 'pod' && args[1] === 'sign') {
  const { ship, ...state } = JSON.parse(readFileSync(join(flag('--repo'), `fake-${run}.json`), 'utf8'));
  if (process.env.SVC_CONTROL_URL && ship) {
    const file = process.env.SVC_CONTROL_TOKEN_FILE;
    const token = file ? readFileSync(file, 'utf8').trim() : '';
    const res = await fetch(`${process.env.SVC_CONTROL_URL}/v1/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ source, runs: [state] }),
    });
    if (!res.ok) process.stderr.write(`ship failed: ${res.status} ${await res.text()}\n`);
  }
  const summary = { source, run, status: state.status, verdict: state.verdict, pr_url: state.pr_url, error: state.error };
  const outcome = flag('--outcome');
  if (state.brief.includes('signer-error')) {
    process.stderr.write(`svc pod: Refused\n${JSON.stringify({ ...summary, status: 'succeeded' })}\n`);
    writeFileSync(outcome, JSON.stringify({ error: 'Refused' }));
    process.exit(1);
  }
  if (state.brief.includes('chatty')) {
    for (let i = 0; i < 1024; i++) process.stderr.write(`${'checking the workspace '.repeat(3).padEnd(79)}\n`);
  }
  writeFileSync(outcome, JSON.stringify(summary));
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  process.exit(0);
}
process.stderr.write(`fake pod svc: unknown arguments ${args.join(' ')}\n`);
process.exit(2);
