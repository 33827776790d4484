// `node --max-semi-space-size=8 --memory-saver-mode scripts/bench/ingest-cpu.ts [BATCHES] [ROOT…]`: in-process CPU per
// event of POST /v1/ingest's handler work in the fan-in's case, for one build or several side by side (each ROOT a tree
// with a built dist/; default this one). One process per build and round, alternating: a Control Plane's deps over a
// file DB (startControl), `ingestRuns` on bodies shaped as the fan-in's runners send them (84 events of one of 100
// runs), parsed as the pipeline parses them, published to 20 bus subscribers that take the shared buffer. No HTTP, no
// sockets, no neighbours' event loops: it moves far less with the machine's load than the row, and shows what a change
// to the ingest path does to it. The flags are the ones `svc control serve` re-executes with (src/cli/server-flags.ts).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const EVENTS = 84;
const RUNS = 100;
const SUBSCRIBERS = 20;
const ROUNDS = 5;

async function measure(root: string, batches: number): Promise<number[]> {
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
      run, seq: first + i + 1, ts, kind: 'log', data: { stream: 'stdout', text: `${text} #${first + i + 1}`, bench_t: sent },
    }));
    const runJson = {
      run, repo: 'bench/ingest', group_id: run, status: 'running', verdict: null, brief: 'ingest bench', origin: 'bench',
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
  const perEvent: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    let us = 0;
    for (let i = 0; i < batches / ROUNDS; i++) us += one(i);
    perEvent.push(us / ((batches / ROUNDS) * EVENTS));
  }
  await running.close();
  rmSync(dir, { recursive: true, force: true });
  return perEvent.sort((a, b) => a - b);
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  const rounds = await measure(args[1]!, Number(args[2]));
  process.stdout.write(JSON.stringify(rounds));
} else {
  const batches = Number(args[0] ?? 3000);
  const roots = args.slice(1).map((p) => resolve(p));
  if (roots.length === 0) roots.push(fileURLToPath(new URL('../..', import.meta.url)));
  for (let pass = 0; pass < 3; pass++) {
    for (const root of roots) {
      const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--child', root,
        String(batches)], { encoding: 'utf8' });
      if (child.status !== 0) throw new Error(`${root}: ${child.stderr}`);
      const rounds = JSON.parse(child.stdout) as number[];
      console.log(`${root}: µs per event, rounds ${rounds.map((x) => x.toFixed(2)).join(' ')}; ` +
        `median ${rounds[Math.floor(ROUNDS / 2)]!.toFixed(2)}`);
    }
  }
}
