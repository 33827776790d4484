// Trigger server: signed webhooks accepted and durably queued per second, and their p99, while two jobs are running
// (a stand-in `svc` keeps them running): against the job's floor (DESIGN §7), against the peer (Loki Mode's Python
// trigger server, stand-in in reference/), and as info against the plain node:http ceiling.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startServer, startTrigger } from './processes.ts';
import { compareWithCeiling, compareWithFloor, comparisonRow, describe, loadJob } from './compare.ts';
import { BENCH_ASSIGNEE, trackerbTemplate } from './trackerb-payload.ts';
import { githubIssuesTemplate } from './github-payload.ts';
import { meetsBar } from './stats.ts';
import { runLoadInWorker } from './worker-client.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';
import type { LoadJob } from './load.ts';

const FLOOR = fileURLToPath(new URL('./trigger-floor-server.ts', import.meta.url));
const FLOOR_BAR = '≥ 0.8× its floor (verify + parse + one transaction per delivery), p99 ≤ 25 ms, max ≤ 100 ms';
const PEER = fileURLToPath(new URL('./reference/loki-trigger-standin.py', import.meta.url));
const PEER_BAR = '≥ 10× the reference Python trigger server (Loki Mode\'s)';
const STANDIN = fileURLToPath(new URL('./standin-svc.js', import.meta.url));
const CONNECTIONS = 16;
const RUNNING = 2;

/** Queues RUNNING jobs through POST /jobs and waits until the server reports them running. */
async function seedRunningJobs(url: string, token: string): Promise<void> {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const ids: string[] = [];
  for (let i = 0; i < RUNNING; i++) {
    const job = JSON.stringify({ brief: `Long-running bench job ${i}` });
    const res = await fetch(`${url}/jobs`, { method: 'POST', headers, body: job });
    const body = (await res.json()) as { job_id?: string };
    if (res.status !== 202 || !body.job_id) {
      throw new Error(`POST /jobs answered ${res.status}: ${JSON.stringify(body)}`);
    }
    ids.push(body.job_id);
  }
  const deadline = Date.now() + 20_000;
  for (;;) {
    const statuses = await Promise.all(
      ids.map(async (id) => {
        const answer = await fetch(`${url}/jobs/${id}`, { headers });
        return ((await answer.json()) as { status?: string }).status;
      }),
    );
    if (statuses.every((s) => s === 'running')) return;
    if (Date.now() > deadline) throw new Error(`seed jobs never reached "running" (${statuses.join(', ')})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * svc against the peer a user would otherwise pick: the same GitHub deliveries to Loki Mode's trigger server (its
 * POST /webhook, X-Hub-Signature-256), alternating rounds. Its queue is lifted like svc's so both answer 202.
 */
async function peerRow(ctx: BenchContext, svcJob: LoadJob, secret: string, svcPid: number): Promise<Row> {
  const figure = 'signed webhook (POST /webhook, GitHub issues) accepted, vs the reference Python trigger server';
  const cwd = join(ctx.tmp, 'loki-peer');
  mkdirSync(cwd, { recursive: true });
  let peer;
  try {
    peer = await startServer([PEER, '--queue-size', '1000000'], { ...ctx.env, GITHUB_WEBHOOK_SECRET: secret }, 30_000,
      'python3', cwd);
  } catch (err) {
    return { figure, value: Number.NaN, unit: '', bar: PEER_BAR, pass: false, note: `not measured: ${String(err)}` };
  }
  try {
    const c = await compareWithFloor(ctx, svcJob, peer.url, { target: svcPid, floor: peer.pid });
    ctx.log(describe('POST /webhook vs the Loki Mode trigger server (stand-in)', c));
    return comparisonRow(figure, c, PEER_BAR, meetsBar(c.ratio, { kind: 'min', value: 10 }),
      `${CONNECTIONS} connections, the ~2.5 KB GitHub bodies of the floor row; the ceiling column is the peer's req/s `
      + '(scripts/bench/reference/loki-trigger-standin.py, Python 3, one connection per request as the peer answers '
      + 'HTTP/1.0)');
  } finally {
    await peer.stop();
  }
}

/** The trigger server under test, serving acme/api, with RUNNING jobs seeded so every delivery stays queued. */
export async function startBenchTrigger(ctx: BenchContext, cli?: string, name = 'trigger') {
  const repo = join(ctx.tmp, `${name}-repo`);
  mkdirSync(repo, { recursive: true });
  // The served repository the GitHub deliveries name (acme/api): with `--repo`, its origin says which one it is, and
  // an event for any other repository is skipped, not queued.
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: repo });
  execFileSync('git', ['remote', 'add', 'origin', 'https://github.com/acme/api.git'], { cwd: repo });
  const secret = randomBytes(24).toString('hex');
  const githubSecret = randomBytes(24).toString('hex');
  const token = randomBytes(24).toString('hex');
  const env: NodeJS.ProcessEnv = {
    ...ctx.env,
    TRACKERB_WEBHOOK_SECRET: secret,
    GITHUB_WEBHOOK_SECRET: githubSecret,
    TRACKERB_ASSIGNEES: BENCH_ASSIGNEE,
    SVC_API_TOKEN: token,
    SVC_TRIGGER_CLI: STANDIN,
    // Every accepted webhook stays queued behind the two running jobs: lift the depth cap so the
    // bench measures acceptance, not 429s.
    SVC_TRIGGER_QUEUE_MAX: '1000000',
  };
  const args = ['--port', '0', '--repo', repo, '--db', join(ctx.tmp, `${name}.db`), '--concurrency', String(RUNNING)];
  const server = await startTrigger(args, env, cli);
  try {
    await seedRunningJobs(server.url, token);
  } catch (err) {
    await server.stop();
    throw err;
  }
  const githubJob = { kind: 'github', secret: githubSecret, template: githubIssuesTemplate() } as const;
  const trackerbJob = { kind: 'trackerb', secret, template: trackerbTemplate() } as const;
  return { server, githubJob, trackerbJob, githubSecret, secret };
}

/**
 * `--only=peer`: the peer row alone. The full run measures it after the floor rows, on a DB they filled with svc's
 * deliveries for 2 × rounds × (warm-up + duration); the same load fills it first here, so the row sees the same DB.
 */
export async function measurePeer(ctx: BenchContext): Promise<Row[]> {
  // Its own repository and DB: with `--only=peer,trigger` the trigger rows' are still in the temp folder.
  const { server, githubJob, githubSecret } = await startBenchTrigger(ctx, undefined, 'peer');
  try {
    const job = loadJob(ctx, server.url, githubJob, CONNECTIONS, [202]);
    const fillMs = 2 * ctx.rounds * (ctx.warmupMs + ctx.durationMs);
    const filled = await runLoadInWorker({ ...job, warmupMs: 0, durationMs: fillMs });
    ctx.log(`peer: ${filled.requests} deliveries queued first (${Math.round(filled.rps)} req/s)`);
    return [await peerRow(ctx, job, githubSecret, server.pid)];
  } finally {
    await server.stop();
  }
}

export async function measureTrigger(ctx: BenchContext): Promise<Row[]> {
  const bar = '≥ 0.30× ceiling, p99 < 25 ms, max < 100 ms';
  const floorPasses = (c: { ratio: number; p99Ms: number; maxMs: number }): boolean =>
    meetsBar(c.ratio, { kind: 'min', value: 0.8 }) && meetsBar(c.p99Ms, { kind: 'max', value: 25 })
    && meetsBar(c.maxMs, { kind: 'max', value: 100 });
  const rows: Row[] = [];
  const { server, githubJob, trackerbJob, githubSecret, secret } = await startBenchTrigger(ctx);
  try {
    // DESIGN §7: each against its floor, the plainest correct intake in a bare node:http server
    // (trigger-floor-server.ts: verify, parse, one transaction per delivery), fed the very same signed bodies.
    for (const [label, job, floorSecret, note] of [
      ['POST /webhook, GitHub issues', githubJob, githubSecret, '~2.5 KB GitHub `issues` `labeled` bodies'],
      ['POST /trackerb', trackerbJob, secret, '~9 KB Jira-style bodies'],
    ] as const) {
      const floor = await startServer([FLOOR], {
        ...ctx.env, FLOOR_MODE: 'commit', FLOOR_SECRET: floorSecret, FLOOR_DB: join(ctx.tmp, `floor-${floorSecret}.db`),
      });
      try {
        const c = await compareWithFloor(ctx, loadJob(ctx, server.url, job, CONNECTIONS, [202]), floor.url);
        ctx.log(describe(`${label} vs its floor (verify + parse + one transaction per delivery)`, c));
        rows.push(comparisonRow(`signed webhook (${label}) accepted + queued, vs its floor`, c, FLOOR_BAR,
          floorPasses(c),
          `${CONNECTIONS} connections, ${note}, each unique; the ceiling column is the floor's req/s`));
      } finally {
        await floor.stop();
      }
    }
    rows.push(await peerRow(ctx, loadJob(ctx, server.url, githubJob, CONNECTIONS, [202]), githubSecret, server.pid));
  } finally {
    await server.stop();
  }
  // Against the plain node:http ceiling reading the same bodies: info rows since DESIGN §7 measures against the floor.
  // Each on a server of its own: at ~16k deliveries/s the rows above queue most of the million jobs the queue holds,
  // and a route may borrow only the pool beyond its reserve, so a later route would measure its 429s.
  const onFreshServer = async (pick: 'githubJob' | 'trackerbJob', label: string) => {
    const fresh = await startBenchTrigger(ctx, undefined, `trigger-${pick}`);
    try {
      const c = await compareWithCeiling(ctx, loadJob(ctx, fresh.server.url, fresh[pick], CONNECTIONS, [202]));
      ctx.log(describe(label, c));
      return c;
    } finally {
      await fresh.server.stop();
    }
  };
  const github = await onFreshServer('githubJob', 'POST /webhook (signed GitHub issues, queued)');
  const trackerb = await onFreshServer('trackerbJob', 'POST /trackerb (signed, queued)');
  rows.push(
    comparisonRow(`signed webhook (POST /webhook, GitHub issues) accepted + queued, ${RUNNING} jobs running`, github,
      `info: vs plain node:http (${bar})`, null,
      `${CONNECTIONS} connections, ~2.5 KB GitHub \`issues\` \`labeled\` bodies, each unique (issue number, ` +
        'X-GitHub-Delivery); the ceiling reads the same bodies'),
    comparisonRow(`signed webhook (POST /trackerb) accepted + queued, ${RUNNING} jobs running`, trackerb,
      `info: vs plain node:http (${bar})`, null,
      `${CONNECTIONS} connections, ~9 KB Jira-style bodies, each unique (new issue key and delivery id); ` +
        'the ceiling reads the same bodies'),
  );
  return rows;
}
