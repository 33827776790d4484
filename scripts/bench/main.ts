// `npm run bench`: measures every figure of DESIGN §7 against the plain node:http ceiling, prints the
// Markdown table on stdout and writes test-output/bench/results.{md,json}. Progress goes to stderr.
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';
import { parseOptions, benchEnv, makeTmp, type BenchContext } from './context.ts';
import { startCeiling, setProfileDir } from './processes.ts';
import { writeResults, type Row } from './report.ts';
import { measureRunsFigures } from './figure-runs.ts';
import { measureIngest } from './figure-ingest.ts';
import { measureSse } from './figure-sse.ts';
import { measureStartup } from './figure-startup.ts';
import { measurePeer, measureTrigger } from './figure-trigger.ts';
import { measureWorkedIn } from './figure-worked.ts';
import { measureSandbox } from './figure-sandbox.ts';
import { measureGate } from './figure-gate.ts';
import { measureDispatch } from './figure-dispatch.ts';
import { benchOwnUs, machineBusyUs } from './cpu-per-request.ts';

const OUT_DIR = fileURLToPath(new URL('../../test-output/bench', import.meta.url));

// `alone`: run only when named in --only (the peer row is part of `trigger` in a full run).
const FIGURES: Array<{ name: string; run: (ctx: BenchContext) => Promise<Row[]>; alone?: true }> = [
  { name: 'runs', run: measureRunsFigures },
  { name: 'ingest', run: measureIngest },
  { name: 'sse', run: measureSse },
  { name: 'startup', run: measureStartup },
  { name: 'trigger', run: measureTrigger },
  { name: 'peer', run: measurePeer, alone: true },
  { name: 'worked', run: measureWorkedIn },
  { name: 'sandbox', run: measureSandbox },
  { name: 'gate', run: measureGate },
  { name: 'dispatch', run: measureDispatch },
];

export async function main(argv: readonly string[]): Promise<number> {
  const options = parseOptions(argv);
  setProfileDir(options.profile ? resolve(options.profile) : undefined);
  const log = (line: string): void => void process.stderr.write(`bench: ${line}\n`);
  const tmp = makeTmp();
  const ceiling = await startCeiling();
  const ctx: BenchContext = {
    options,
    outDir: OUT_DIR,
    tmp: tmp.path,
    env: benchEnv(tmp.path),
    ceiling,
    warmupMs: options.quick ? 300 : 500,
    durationMs: options.quick ? 1500 : 2000,
    rounds: options.quick ? 1 : 5,
    log,
  };
  const rows: Row[] = [];
  const began = Date.now();
  const [busyBefore, ownBefore] = [machineBusyUs(), benchOwnUs()];
  let failures = 0;
  try {
    for (const figure of FIGURES) {
      if (options.only.length ? !options.only.includes(figure.name) : figure.alone) continue;
      log(`— ${figure.name}`);
      try {
        rows.push(...(await figure.run(ctx)));
      } catch (err) {
        failures += 1;
        const message = err instanceof Error ? err.message : String(err);
        log(`${figure.name} could not be measured: ${message}`);
        const note = `not measured: ${message.slice(0, 300)}`;
        rows.push({ figure: figure.name, value: Number.NaN, unit: '', bar: 'measured', pass: false, note });
      }
    }
  } finally {
    await ceiling.stop();
    tmp.remove();
  }
  // What else used the cores meanwhile: every row of a server and its load generator reads low with it, and the peer
  // ratio most (docs/bench-history.md, "The peer row's 8.01x measured apart").
  const others = (machineBusyUs() - busyBefore - (benchOwnUs() - ownBefore)) / 1000 / (Date.now() - began);
  const meta = {
    mode: options.quick ? 'quick' : 'full',
    node: process.version,
    cpus: `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown'}`,
    date: new Date().toISOString(),
    seconds: ((Date.now() - began) / 1000).toFixed(0),
    'other load': `${Math.max(0, others).toFixed(2)} cores (CPU used by other processes meanwhile, steal included)`,
  };
  const { markdown, files } = writeResults(OUT_DIR, rows, meta);
  process.stdout.write(markdown);
  log(`wrote ${files.join(', ')}`);
  return failures ? 1 : 0;
}
