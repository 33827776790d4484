#!/usr/bin/env node
// Entry point: checks the Node version before anything that needs node:sqlite is loaded, then dispatches.
import './quiet-sqlite-warning.ts';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { exitLike, runLaunched, secretsIn, watchLifeline } from './spawn/start.ts';
import { reexecClean, takeHandoff, useCompileCache, type Secrets } from './cli/node-setup.ts';
import { terminalSafe } from './safe-json.ts';
import { errorMessage, exitStatusOf, UsageError } from './errors.ts';
import type { CliIo } from './cli/io.ts';
import type { WorkerMode } from './engine/run-state.ts';
import { VERSION } from './version.ts';

const MIN = [22, 13] as const;

const here = (relative: string) => fileURLToPath(new URL(relative, import.meta.url));
// Only the one-folder bundle (scripts/bundle.js) has a bin/svc launcher next to dist/; a checkout has node_modules.
const bundleRoot = existsSync(here('../bin/svc')) ? here('..').replace(/\/$/, '') : null;

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < MIN[0] || (major === MIN[0] && minor < MIN[1])) {
  // Started by an older Node (an `npm link`ed `svc`, a bundle's launcher): the Node this install carries runs it.
  const pinned = bundleRoot ? here('../node/bin/node') : here('../node_modules/node/bin/node');
  if (!existsSync(pinned)) {
    const advice = bundleRoot
      ? `point SVC_NODE at a newer node, or put one at ${bundleRoot}/node/bin/node ` +
        '(a bundle made with `npm run bundle -- --with-node` carries one there)'
      : 'run `npm ci` in the svc checkout to install the pinned one';
    process.stderr.write(`svc needs Node.js >= ${MIN.join('.')} (found ${process.versions.node}); ${advice}\n`);
    process.exit(1);
  }
  exitLike(await runLaunched([pinned, ...process.execArgv, process.argv[1]!, ...process.argv.slice(2)],
    { kind: 'svc-worker', base: process.env }));
}
watchLifeline(process.env);

/** process.env plus the secrets handed over, which are deleted from process.env so they live in this object only. */
function inMemoryEnv(handed: Secrets): NodeJS.ProcessEnv {
  const inherited = secretsIn(process.env);
  for (const name of Object.keys(inherited)) delete process.env[name];
  return { ...process.env, ...inherited, ...handed };
}

// Every print of every command passes here: text from outside (briefs, errors, server answers) reaches no terminal raw.
const printOut = (text: string) => process.stdout.write(terminalSafe(text));
const printErr = (text: string) => process.stderr.write(terminalSafe(text));

type Loader = () => Promise<{ default: (io: CliIo) => Promise<number>; HELP?: string }>;

// Lazy imports keep `svc --version` fast and keep node:sqlite out of commands that don't need it. A command's
// subcommands are listed in its help line and let `svc import` be pointed to `svc control import`.
const commands: Record<string, [summary: string, load: Loader, subcommands?: readonly string[]]> = {
  control: ['Run or query the Control Plane, or register a project with it',
    () => import('./cli/control.ts'), ['serve', 'status', 'import']],
  dashboard: ['Open the Control Plane UI, starting it if needed',
    () => import('./cli/dashboard.ts'), ['start', 'open', 'stop']],
  start: ['Start a run from a brief, spec file, issue export or issue URL', () => import('./cli/start.ts')],
  init: ['Write a stand-in agent that needs no API key into .svc/ (a first run)', () => import('./cli/init.ts')],
  trust: ["Allow this repository's .svc/config.json to widen CLI runs' sandbox (--list, --revoke)",
    () => import('./cli/trust.ts')],
  answer: ['Answer a blocked run', () => import('./cli/answer.ts')],
  runs: ['List and steer runs on the Control Plane', () => import('./cli/runs.ts'),
    ['list', 'show', 'logs', 'stop', 'resume', 'retry', 'verify', 'pr', 'answer']],
  ship: ['Re-send local runs to the Control Plane', () => import('./cli/ship.ts')],
  prune: ["Remove ended runs' worktrees, svc/<run> branches and managed checkouts", () => import('./cli/prune.ts')],
  receipt: ['Check an Evidence Receipt', () => import('./cli/receipt.ts'), ['verify']],
  keys: ['List or rotate the receipt signing keys', () => import('./cli/keys.ts'), ['list', 'rotate']],
  deploy: ['Write or show deploy records', () => import('./cli/deploy.ts'), ['record', 'last']],
  trigger: ['Run the webhook trigger server', () => import('./cli/trigger.ts'), ['serve']],
  gate: ['Run the egress gate as its own server, for Kubernetes job pods', () => import('./cli/gate.ts'), ['serve']],
  repos: ["Edit the trigger server's served repositories", () => import('./cli/repos.ts'), ['list', 'add', 'remove']],
  doctor: ['Check that agent runs can be sandboxed on this host', () => import('./cli/doctor.ts')],
  pod: ['Steps of a Kubernetes job pod around its run', () => import('./cli/pod.ts'), ['seal', 'sign']],
  providers: ['List agent CLIs, their versions and whether svc tested them', () => import('./cli/providers.ts')],
};

function help(): string {
  const lines = Object.entries(commands).map(([name, [summary, , subs]]) =>
    `  ${name.padEnd(10)} ${summary}${subs ? ` (${subs.join(', ')})` : ''}`);
  return [
    'Usage: svc <command> [options]',
    '',
    'Commands:',
    ...lines,
    '',
    'Global options:',
    '  --version   print the version',
    '  --help      help for svc or for a command (svc <command> --help)',
    '  --verbose   show stack traces on errors',
    '',
  ].join('\n');
}

/**
 * `svc worker MODE --run-id RUN --repo DIR`, not in the help: the process a run's launcher (`svc start`) starts
 * detached, in a process group of its own, to do the run by the plan the launcher wrote (src/engine/worker.ts).
 */
async function worker(io: CliIo): Promise<number> {
  // Loaded here, not at the top, so that `svc --version` and the other commands load no more than they need.
  const [{ parseFlags }, { runDir }, { isValidSegment }] = await Promise.all([
    import('./cli/io.ts'), import('./engine/paths.ts'), import('./engine/ids.ts')]);
  const { values, positionals } = parseFlags(io.argv, { 'run-id': { type: 'string' }, repo: { type: 'string' } });
  const mode = positionals[0] as WorkerMode;
  if (!['start', 'resume', 'verify'].includes(mode)) throw new UsageError(`Unknown worker mode "${mode}"`);
  const run = values['run-id'];
  if (!isValidSegment(run) || !values.repo) throw new UsageError('Missing --run-id RUN or --repo DIR');
  const { executeRun } = await import('./engine/worker.ts');
  return executeRun(runDir(values.repo, run), io.env, mode, io.stderr);
}

async function main(argv: string[]): Promise<number> {
  const verbose = argv.includes('--verbose');
  const rest = argv.filter((a) => a !== '--verbose');
  const [name, ...tail] = rest;
  if (name === '--version' || name === '-v' || name === 'version') {
    printOut(`${VERSION}\n`);
    return 0;
  }
  if (name === 'help' && tail[0]) return main([tail[0], '--help']);
  if (name === 'help' || name === '--help' || name === '-h') {
    printOut(help());
    return 0;
  }
  if (name === undefined) {
    // A usage error (exit 2): the help goes where errors go, as for an unknown command.
    printErr(help());
    return 2;
  }
  const load: Loader | undefined = name === 'worker' ? async () => ({ default: worker }) : commands[name]?.[1];
  if (!load) {
    // `svc import` for `svc control import`: a word that is another command's subcommand is named where it lives.
    const owners = Object.entries(commands).filter(([, [, , subs]]) => subs?.includes(name));
    const hint = owners.map(([owner]) => `svc ${owner} ${name}`).join(' or ');
    printErr(`svc: unknown command "${name}"${hint ? ` (did you mean ${hint}?)` : ''}\n\n${help()}`);
    return 2;
  }
  // The servers and a run's launcher re-execute once without secrets in their environment (node-setup.ts); a
  // parent's pipe does not survive that, so what it handed over is taken first.
  const handed = takeHandoff(process.env);
  const helpAsked = tail.includes('--help') || tail.includes('-h');
  const serve = (name === 'control' || name === 'trigger') && tail[0] === 'serve';
  if (!helpAsked && (serve || name === 'start')) {
    reexecClean({ serverFlags: name === 'control', handed });
  }
  const env = inMemoryEnv(handed);
  try {
    // A command's modules come with the dynamic import below: those are what the cache keeps (docs/engine.md).
    useCompileCache(env, VERSION);
    const mod = await load();
    if (helpAsked && mod.HELP !== undefined) {
      printOut(mod.HELP);
      return 0;
    }
    return await mod.default({ argv: tail, env, stdout: printOut, stderr: printErr });
  } catch (err) {
    printErr(`svc ${name}: ${errorMessage(err)}\n`);
    if (verbose && err instanceof Error && err.stack) printErr(`${err.stack}\n`);
    return exitStatusOf(err);
  }
}

// A run's worker and its launcher end when their command returns (the run's end on disk, its last ship tried), not
// when the event loop drains: a handle something left open (a socket, a timer, a child's pipe) must not keep them.
const endsOnReturn = ['worker', 'start'].includes(process.argv.slice(2).find((a) => a !== '--verbose') ?? '');

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // After what was printed: a pipe's writes may still be queued where they are asynchronous (macOS).
    if (endsOnReturn) process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
  },
  (err: unknown) => {
    printErr(`svc: ${errorMessage(err)}\n`);
    process.exitCode = 1;
  },
);
