// `node scripts/bench/peer-cpu.ts [ROUNDS] [DELIVERIES] [CLI…] [--access-log]`: server CPU per `/webhook` delivery in
// the peer row's case, for one build or several side by side (each CLI a build's dist/cli.js; default this tree's).
// Each build gets its own `svc trigger serve` as the peer row starts it, filled first with FILL (default 200,000)
// deliveries as the full run's floor rows fill it; then ROUNDS rounds, the builds alternating (order flipped every
// round), each round a fixed number of deliveries on the row's 16 connections. The figure is the server's utime +
// stime from /proc around those deliveries ÷ their count (and the event-loop thread's alone): unlike req/s it hardly
// moves when neighbours load the cores. PROFILE_DIR=… writes each server's V8 CPU profile there on exit. CALLGRIND=DIR
// runs each server under valgrind's callgrind, counting only during the rounds: the figure is then the server's
// user-space instructions per delivery (Ir), which other load does not move at all (the kernel's part is not in it).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { benchEnv, makeTmp, type BenchContext } from './context.ts';
import { CLI, VGDB_ENV, setCallgrindDir, setProfileDir, type ServerProcess } from './processes.ts';
import { startBenchTrigger } from './figure-trigger.ts';
import { loadJob } from './compare.ts';
import { runLoadInWorker } from './worker-client.ts';
import { median } from './stats.ts';
import { cpuUs } from './cpu-per-request.ts';

// Flags (`--access-log`: every server logs its request lines, as `npm run bench -- --access-log`) are read by benchEnv.
const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const rounds = Number(args[0] ?? 6);
const deliveries = Number(args[1] ?? 30_000);
const clis = args.slice(2).map((p) => resolve(p));
if (clis.length === 0) clis.push(CLI);
const fill = Number(process.env.FILL ?? 200_000);
setProfileDir(process.env.PROFILE_DIR ? resolve(process.env.PROFILE_DIR) : undefined);
const callgrind = process.env.CALLGRIND ? resolve(process.env.CALLGRIND) : undefined;
if (callgrind) mkdirSync(callgrind, { recursive: true });
setCallgrindDir(callgrind);

// callgrind_control on a server. Its counts are read by `--dump` (which zeroes them) with counting still on: `--zero`
// and `--instr=off` leave counts a dump then reads as nonsense, so a round turns counting on, dumps once to start
// from 0, and dumps again at its end.
function control(pid: number, ...flags: string[]): void {
  execFileSync('callgrind_control', [`--vgdb-prefix=${callgrind}/vgdb`, ...flags, String(pid)], {
    stdio: 'ignore', env: { ...process.env, ...VGDB_ENV },
  });
}

/** The instructions counted since the server's last dump: its newest dump's `summary:` line. */
function dumpedIr(pid: number): number {
  control(pid, '--dump');
  const dumps = readdirSync(callgrind!).filter((f) => f.startsWith(`callgrind.${pid}.`)).sort((a, b) =>
    Number(a.split('.').pop()) - Number(b.split('.').pop()));
  const file = join(callgrind!, dumps.at(-1)!);
  const ir = Number(/^summary: (\d+)/m.exec(readFileSync(file, 'utf8'))?.[1]);
  rmSync(file);
  return ir;
}

interface Build {
  cli: string;
  server: ServerProcess;
  tmp: { remove(): void };
  job: ReturnType<typeof loadJob>;
  process: number[];
  loop: number[];
  rps: number[];
  /** Instructions per delivery, with CALLGRIND. */
  ir: number[];
}

const log = (line: string): void => void process.stderr.write(`peer-cpu: ${line}\n`);
const builds: Build[] = [];
try {
  for (const cli of clis) {
    const tmp = makeTmp();
    const ctx = { tmp: tmp.path, env: benchEnv(tmp.path), warmupMs: 0, durationMs: 600_000 } as BenchContext;
    const { server, githubJob } = await startBenchTrigger(ctx, cli);
    const job = loadJob(ctx, server.url, githubJob, 16, [202]);
    builds.push({ cli, server, tmp, job, process: [], loop: [], rps: [], ir: [] });
    const filled = await runLoadInWorker({ ...job, maxRequests: fill });
    log(`${cli}: ${filled.requests} deliveries queued first (${Math.round(filled.rps)} req/s)`);
  }
  for (let r = 0; r < rounds; r++) {
    for (const b of r % 2 === 0 ? builds : [...builds].reverse()) {
      const pid = b.server.pid;
      if (callgrind) {
        control(pid, '--instr=on');
        dumpedIr(pid); // a dump zeroes the count: the round's starts here
      }
      const [p0, t0] = [cpuUs(`/proc/${pid}/stat`), cpuUs(`/proc/${pid}/task/${pid}/stat`)];
      const result = await runLoadInWorker({ ...b.job, maxRequests: deliveries });
      const [p1, t1] = [cpuUs(`/proc/${pid}/stat`), cpuUs(`/proc/${pid}/task/${pid}/stat`)];
      if (callgrind) {
        b.ir.push(dumpedIr(pid) / result.requests);
        control(pid, '--instr=off');
      }
      if (result.unexpected) throw new Error(`${b.cli}: ${result.unexpected} unexpected answers: ${result.sample}`);
      b.process.push((p1 - p0) / result.requests);
      b.loop.push((t1 - t0) / result.requests);
      b.rps.push(result.rps);
    }
  }
  process.stdout.write(
    '| build | CPU per delivery, process (median, min) | event loop (median, min) | req/s (median) |\n');
  process.stdout.write('|---|---:|---:|---:|\n');
  const f = (xs: number[]): string => `${median(xs).toFixed(1)}, ${Math.min(...xs).toFixed(1)} µs`;
  for (const b of builds) {
    process.stdout.write(`| ${b.cli} | ${f(b.process)} | ${f(b.loop)} | ${Math.round(median(b.rps))} |\n`);
    log(`${b.cli}: process ${b.process.map((x) => x.toFixed(1)).join(' ')}; req/s ${b.rps.map(Math.round).join(' ')}`);
    if (callgrind) log(`${b.cli}: Ir per delivery ${b.ir.map(Math.round).join(' ')}; median ${median(b.ir)}`);
  }
} finally {
  for (const b of builds) {
    await b.server.stop();
    b.tmp.remove();
  }
}
