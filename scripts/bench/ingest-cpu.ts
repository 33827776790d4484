// `node --max-semi-space-size=8 --memory-saver-mode scripts/bench/ingest-cpu.ts [BATCHES] [ROOT…] [--worked=RUNS]`:
// in-process CPU per event of POST /v1/ingest's handler work in the fan-in's case, for one build or several side by
// side (each ROOT a tree with a built dist/; default this one). One process per build and round, alternating: a
// Control Plane's deps over a file DB (startControl), `ingestRuns` on bodies shaped as the fan-in's runners send them
// (84 events of one of 100 runs), parsed as the pipeline parses them, published to 20 bus subscribers that take the
// shared buffer. No HTTP, no sockets, no neighbours' event loops: it moves far less with the machine's load than the
// row, and shows what a change to the ingest path does to it. The flags are the ones `svc control serve` re-executes
// with (src/cli/node-setup.ts).
// `--worked=RUNS` first ingests RUNS finished runs in the same process, 500 a request, as the worked-in row's server
// takes them before its fan-in (docs/bench.md, "A worked-in server: pretenuring"); the line then adds V8's
// mark-compacts during the measured batches.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PerformanceObserver, constants } from 'node:perf_hooks';

const EVENTS = 84;
const RUNS = 100;
const SUBSCRIBERS = 20;
const ROUNDS = 5;

/** `runs` finished runs as the worked-in row's first step sends them (request-makers.ts `ingest-runs`). */
function finishedRuns(first: number, count: number): unknown[] {
  const base = Date.now() - 30 * 86_400_000;
  return Array.from({ length: count }, (_, i) => {
    const n = first + i;
    const run = `rworked${String(n).padStart(10, '0')}`;
    return {
      run, repo: `acme/r${n % 30}`, group_id: run, status: n % 5 ? 'succeeded' : 'failed',
      verdict: n % 5 ? 'verified' : 'not_verified', brief: `Fix the flaky retry in the upload client (#${n})`,
      origin: 'cli', provider: 'claude', branch: `svc/${run}`, pr_url: null, question: null,
      started_at: new Date(base + n * 1000).toISOString(), ended_at: new Date(base + n * 1000 + 600_000).toISOString(),
      updated_at: new Date(base + n * 1000 + 600_000).toISOString(), cost_usd: (n % 400) / 100,
      tokens_in: 10_000 + (n % 5000), tokens_out: 1000 + (n % 500), exit_code: n % 5 ? 0 : 1, error: null,
    };
  });
}

async function measure(root: string, batches: number, worked: number): Promise<{ rounds: number[]; majors: number }> {
  const load = (path: string) => import(join(root, 'dist', path));
  const { startControl } = await load('control/main.js');
  const { resolveControlSettings } = await load('control/settings.js');
  const { ingestRuns } = await load('control/handlers/ingest.js');
  const { parseJson } = await load('http/body.js');
  const dir = mkdtempSync(join(tmpdir(), 'svc-ingest-cpu-'));
  const home = join(dir, 'home');
  mkdirSync(home);
  const settings = {
    ...resolveControlSettings({ HOME: home }, { host: '127.0.0.1', port: '0', db: join(dir, 'control.db') }),
    allowInsecureBind: true,
  };
  const silent = { info() {}, warn() {}, error() {}, debug() {}, child: () => silent };
  const running = await startControl(settings, { HOME: home, PATH: process.env.PATH }, silent);
  const { deps } = running;
  for (let first = 1; first <= worked; first += 500) {
    const runs = finishedRuns(first, Math.min(500, worked - first + 1));
    const bytes = Buffer.from(JSON.stringify({ source: 'worked', runs, events: [], artifacts: [] }));
    const reply = ingestRuns({ body: parseJson(bytes), deps, runnerSource: undefined });
    if (reply.status !== 200) throw new Error(`ingest answered ${reply.status}: ${JSON.stringify(reply.body)}`);
  }
  let majors = 0;
  const gcs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const { detail } = e as { detail?: { kind?: number } };
      if (detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors += 1;
    }
  });
  for (let i = 0; i < SUBSCRIBERS; i++) deps.bus.subscribe({ deliver() {}, end() {} });
  const stamp = Date.now().toString(36);
  const text = 'bench output line: compiling module, running checks, writing artifacts';
  const seqs = new Array<number>(RUNS).fill(0);
  function body(runner: number): Buffer {
    const run = `rbench${stamp}c${runner}`;
    const first = seqs[runner]!;
    seqs[runner] = first + EVENTS;
    const ts = new Date().toISOString();
    const sent = performance.timeOrigin + performance.now();
    const events = Array.from({ length: EVENTS }, (_, i) => ({
      run, seq: first + i + 1, ts, kind: 'log',
      data: { stream: 'stdout', text: `${text} #${first + i + 1}`, bench_t: sent },
    }));
    const runJson = {
      run, repo: 'bench/ingest', group_id: run, status: 'running', verdict: null, brief: 'ingest bench',
      origin: 'bench',
      provider: 'command', branch: `svc/${run}`, pr_url: null, question: null, started_at: ts, ended_at: null,
      updated_at: ts, cost_usd: null, tokens_in: null, tokens_out: null, exit_code: null, error: null,
      run_key: 'bench-run-key-0123456789abcdefghijklmnopqrstuv',
    };
    return Buffer.from(JSON.stringify({ source: 'fanin', runs: [runJson], events, artifacts: [] }));
  }
  /** CPU µs of one batch's handling; the body is made outside the measured span. */
  function one(n: number): number {
    const bytes = body(n % RUNS);
    const start = process.cpuUsage();
    const reply = ingestRuns({ body: parseJson(bytes), deps, runnerSource: undefined });
    const used = process.cpuUsage(start);
    if (reply.status !== 200) throw new Error(`ingest answered ${reply.status}: ${JSON.stringify(reply.body)}`);
    return used.user + used.system;
  }
  for (let i = 0; i < 500; i++) one(i);
  gcs.observe({ entryTypes: ['gc'] });
  const perEvent: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    let us = 0;
    for (let i = 0; i < batches / ROUNDS; i++) us += one(i);
    perEvent.push(us / ((batches / ROUNDS) * EVENTS));
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  gcs.disconnect();
  await running.close();
  rmSync(dir, { recursive: true, force: true });
  return { rounds: perEvent.sort((a, b) => a - b), majors };
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  process.stdout.write(JSON.stringify(await measure(args[1]!, Number(args[2]), Number(args[3]))));
} else {
  const workedArg = args.find((a) => a.startsWith('--worked='));
  const worked = workedArg ? Number(workedArg.slice('--worked='.length)) : 0;
  if (!Number.isSafeInteger(worked) || worked < 0 || workedArg === '--worked=') {
    throw new Error(`--worked= takes a whole number of runs, not "${workedArg}"`);
  }
  const positional = args.filter((a) => !a.startsWith('--'));
  const batches = Number(positional[0] ?? 3000);
  const roots = positional.slice(1).map((p) => resolve(p));
  if (roots.length === 0) roots.push(fileURLToPath(new URL('../..', import.meta.url)));
  for (let pass = 0; pass < 3; pass++) {
    for (const root of roots) {
      const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--child', root,
        String(batches), String(worked)], { encoding: 'utf8' });
      if (child.status !== 0) throw new Error(`${root}: ${child.stderr}`);
      const { rounds, majors } = JSON.parse(child.stdout) as { rounds: number[]; majors: number };
      console.log(`${root}: µs per event, rounds ${rounds.map((x) => x.toFixed(2)).join(' ')}; ` +
        `median ${rounds[Math.floor(ROUNDS / 2)]!.toFixed(2)}; ${majors} mark-compacts`);
    }
  }
}
