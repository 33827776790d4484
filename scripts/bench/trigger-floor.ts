// `node scripts/bench/trigger-floor.ts [ROUNDS] [trackerb|github]`: the floor ladder behind the signed-webhook figure.
// Each rung is measured exactly like the figure (16 connections, unique signed ~9 KB trackerb or ~2.5 KB GitHub
// bodies, alternating with the plain node:http ceiling, medians) and also reports the server's CPU per request
// from /proc, which neighbours on the shared cores disturb far less than req/s. With `github` the last rung is the
// peer, Loki Mode's Python trigger server (its stand-in, reference/loki-trigger-standin.py). Rungs: plain node:http
// reading the body; + verification and parse; + one durable transaction per delivery; `svc trigger serve` itself.
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { startCeiling, startServer, CLI, type ServerProcess } from './processes.ts';
import { runLoadInWorker } from './worker-client.ts';
import { benchEnv } from './context.ts';
import { BENCH_ASSIGNEE, trackerbTemplate } from './trackerb-payload.ts';
import { githubIssuesTemplate } from './github-payload.ts';
import { median } from './stats.ts';
import { NODE_FLAGS } from './worker-client.ts';
import type { LoadJob } from './load.ts';

const FLOOR = fileURLToPath(new URL('./trigger-floor-server.ts', import.meta.url));
const STANDIN = fileURLToPath(new URL('./standin-svc.js', import.meta.url));
const rounds = Number(process.argv[2] ?? 3);
const github = process.argv[3] === 'github';
const PEER = fileURLToPath(new URL('./reference/loki-trigger-standin.py', import.meta.url));
const secret = randomBytes(24).toString('hex');
const token = randomBytes(24).toString('hex');
const tmp = mkdtempSync(join(tmpdir(), 'svc-floor-'));

function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10; // utime + stime, 100 Hz ticks
}

async function svcTrigger(): Promise<ServerProcess> {
  const repo = join(tmp, 'repo');
  mkdirSync(repo, { recursive: true });
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: repo });
  execFileSync('git', ['remote', 'add', 'origin', 'https://github.com/acme/api.git'], { cwd: repo });
  const env = {
    ...benchEnv(tmp), ...(github ? { GITHUB_WEBHOOK_SECRET: secret } : { TRACKERB_WEBHOOK_SECRET: secret }),
    TRACKERB_ASSIGNEES: BENCH_ASSIGNEE, SVC_API_TOKEN: token, SVC_TRIGGER_CLI: STANDIN,
    SVC_TRIGGER_QUEUE_MAX: '1000000',
  };
  const args = ['--port', '0', '--repo', repo, '--db', join(tmp, 'trigger.db'), '--concurrency', '2'];
  const server = await startServer([CLI, 'trigger', 'serve', ...args], env);
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  for (let i = 0; i < 2; i++) {
    const body = JSON.stringify({ brief: `Long-running bench job ${i}` });
    await fetch(`${server.url}/jobs`, { method: 'POST', headers, body });
  }
  return server;
}

/** The floor server in one of its modes (read, verify, commit), with what that mode needs beside. */
const floor = (env: Record<string, string>) => () => startServer([...NODE_FLAGS, FLOOR], { ...process.env, ...env });
const rungs: Array<{ name: string; start: () => Promise<ServerProcess> }> = [
  { name: 'plain node:http: read the body, 202', start: floor({ FLOOR_MODE: 'read' }) },
  { name: '+ HMAC verify, sha256 key, JSON.parse', start: floor({ FLOOR_MODE: 'verify', FLOOR_SECRET: secret }) },
  { name: '+ one transaction per delivery (WAL, NORMAL)',
    start: floor({ FLOOR_MODE: 'commit', FLOOR_SECRET: secret, FLOOR_DB: join(tmp, 'floor.db') }) },
  { name: 'svc trigger serve, 2 jobs running', start: svcTrigger },
  ...(github ? [{ name: 'Loki Mode trigger server (stand-in, Python)', start: () => {
    const cwd = join(tmp, 'loki');
    mkdirSync(cwd, { recursive: true });
    const env = { ...process.env, GITHUB_WEBHOOK_SECRET: secret };
    return startServer([PEER, '--queue-size', '1000000'], env, 30_000, 'python3', cwd);
  } }] : []),
];

// RUNGS=3,4 measures only those rungs (1-based), e.g. the floor and svc side by side.
const only = (process.env.RUNGS ?? '').split(',').filter(Boolean).map(Number);
const chosen = only.length ? rungs.filter((_, i) => only.includes(i + 1)) : rungs;
const ceiling = await startCeiling();
try {
  process.stdout.write('| rung | req/s | ceiling | ratio | p99 | server CPU per request |\n' +
    '|---|---:|---:|---:|---:|---:|\n');
  for (const rung of chosen) {
    const server = await rung.start();
    const request: LoadJob['request'] = github
      ? { kind: 'github', secret, template: githubIssuesTemplate() }
      : { kind: 'trackerb', secret, template: trackerbTemplate() };
    const job: LoadJob = { url: server.url, connections: 16, warmupMs: 500, durationMs: 2000, request, expect: [202] };
    const ceilingJob: LoadJob = { ...job, url: ceiling.url, request: { kind: 'get', path: '/health' }, expect: [200] };
    const rps: number[] = [], ceilings: number[] = [], p99: number[] = [], cpu: number[] = [];
    for (let i = 0; i < rounds; i++) {
      ceilings.push((await runLoadInWorker(ceilingJob)).rps);
      const before = cpuMs(server.pid);
      const result = await runLoadInWorker(job);
      // CPU over warm-up + measurement, per request completed in that time (the rate holds through both).
      cpu.push(((cpuMs(server.pid) - before) * 1000) / (result.rps * (job.warmupMs + job.durationMs) / 1000));
      if (result.unexpected) {
        throw new Error(`${rung.name}: ${result.unexpected} unexpected answers: ${result.sample ?? ''}`);
      }
      rps.push(result.rps);
      p99.push(result.latencyMs.p99);
    }
    const r = median(rps), c = median(ceilings);
    process.stdout.write(`| ${rung.name} | ${Math.round(r)} | ${Math.round(c)} | ${(r / c).toFixed(2)}× | ` +
      `${median(p99).toFixed(1)} ms | ${median(cpu).toFixed(0)} µs |\n`);
    await server.stop();
  }
} finally {
  await ceiling.stop();
  rmSync(tmp, { recursive: true, force: true });
}
