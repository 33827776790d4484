#!/usr/bin/env node
// Stand-in for the container's `svc start …` run in the foreground inside a Kubernetes Job pod: ships its run to
// the Control Plane (token from SVC_CONTROL_TOKEN_FILE), then prints the final summary line like svc start does.
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';

const args = process.argv.slice(2);
const text = args.join(' ');
if (text.includes('no-run-line')) {
  process.stderr.write('provider crashed\n');
  process.exit(2);
}
const source = process.env.SVC_SOURCE || 'local';
const run = `r${randomBytes(13).toString('hex')}`;
const failed = text.includes('make-it-fail');
if (text.includes('announce')) process.stdout.write(`${JSON.stringify({ source, run })}\n`);
const now = new Date().toISOString();
const state = {
  run, status: failed ? 'failed' : 'succeeded', verdict: failed ? 'not_verified' : 'verified',
  pr_url: failed ? null : 'https://git.example.test/acme/api/pull/9', cost_usd: 0.25, started_at: now, ended_at: now,
  error: failed ? 'Required check "test" failed (exit 1)' : null, brief: text,
};
if (process.env.SVC_CONTROL_URL && !text.includes('no-ship')) {
  const token = process.env.SVC_CONTROL_TOKEN_FILE ? readFileSync(process.env.SVC_CONTROL_TOKEN_FILE, 'utf8').trim() : '';
  const res = await fetch(`${process.env.SVC_CONTROL_URL}/v1/ingest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ source, runs: [state] }),
  });
  if (!res.ok) process.stderr.write(`ship failed: ${res.status} ${await res.text()}\n`);
}
process.stdout.write(`${JSON.stringify({ source, run, status: state.status, verdict: state.verdict, pr_url: state.pr_url, error: state.error })}\n`);
process.exit(failed ? 1 : 0);
