// The order of a walk (docs/architecture.md "Doubling back"): every function of the src/ files a walk counts gets a
// logpoint, an inspector breakpoint whose condition records the call and answers false, so nothing pauses. Each call is recorded with the
// files of the stack below it, which says whether control entered the function's file from outside or was already
// in it. Every call is seen, in the order it happens in its process; no sampling, no clock. The order is not stable
// across concurrent work (which of a file's functions runs first, and from which caller, can wait on a child's exit
// or a timer): the set of files doubled back into is, so that is what the walk tests hold.
// The test's process parses src/ once (probesOf); imported with --import by a child process (WALK_ORDER_DIR set),
// this module takes the probes the test wrote there, so the child never loads TypeScript, records that process's
// whole life and writes its calls to WALK_ORDER_DIR/<pid>.json as the process exits.
import { Session } from 'node:inspector';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import assert from 'node:assert/strict';
import type ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * A call: the function's file and its outermost function in that file; when no frame below it is of that file (control
 * came from elsewhere), `from` lists the src/ files of the frames below, nearest first.
 */
export interface Call { file: string; top: string; from?: string[] }

/** Every .ts file under src/. */
function sources(dir = join(ROOT, 'src'), out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) sources(full, out);
    else if (name.endsWith('.ts')) out.push(full);
  }
  return out;
}

/** Where a function of `file` starts running, and the outermost function around it. */
export interface Probe { line: number; column: number; file: string; top: string }

/** A function's name, or the name it is given (`const f = () =>`, `{ f: () => … }`); lines change too often. */
function nameOf(node: ts.Node, sf: ts.SourceFile): string {
  const named = (node as { name?: ts.Node }).name ?? (node.parent as { name?: ts.Node } | undefined)?.name;
  return named?.getText(sf) ?? '(anonymous)';
}

/**
 * Where each function of the files of src/ that `counted` says count starts running (its body's first statement, or
 * its expression), with the name of the outermost function around it: code written inside a function a reader has
 * read is read with it. Node strips types by blanking them, so these places are the running code's own. The other
 * files get no probe: their calls would be recorded only to be skipped.
 */
export function probesOf(counted: (file: string) => boolean): Probe[] {
  // Loaded here, not at the top: a recording child imports this module and must not pay for TypeScript.
  const typescript = createRequire(import.meta.url)('typescript') as typeof ts;
  const out: Probe[] = [];
  for (const path of sources()) {
    const file = relative(ROOT, path);
    if (!counted(file)) continue;
    const sf = typescript.createSourceFile(path, readFileSync(path, 'utf8'), typescript.ScriptTarget.Latest, true);
    const visit = (node: ts.Node, top: string | null): void => {
      let inner = top;
      if (typescript.isFunctionLike(node) && 'body' in node && node.body) {
        const body = node.body as ts.Node;
        inner = top ?? nameOf(node, sf);
        const at = typescript.isBlock(body) ? (body.statements[0]?.getStart(sf) ?? body.end - 1) : body.getStart(sf);
        const { line, character } = sf.getLineAndCharacterOfPosition(at);
        out.push({ line, column: character, file, top: inner });
      }
      typescript.forEachChild(node, (child) => visit(child, inner));
    };
    visit(sf, null);
  }
  return out;
}

const SRC = pathToFileURL(join(ROOT, 'src')).href + '/';
const FRAME = /\((file:\/\/[^)]+?):\d+:\d+\)$|at (file:\/\/\S+?):\d+:\d+$/;

/**
 * Starts recording on this thread: a logpoint at each of `probes`. Recording is on while `on()` says so.
 * Returns the calls recorded so far (the caller keeps its own cursor) and a stop.
 */
export function recordOrder(
  probes: readonly Probe[], on: () => boolean = () => true,
): { calls: Call[]; stop: () => void } {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object): void => session.post(method, params, (err) => {
    if (err) throw err;
  });
  const calls: Call[] = [];
  const global = globalThis as { __svcWalkOrder?: (i: number) => void };
  global.__svcWalkOrder = (i: number) => {
    if (!on()) return;
    const probe = probes[i]!;
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = Infinity;
    const stack = new Error().stack!.split('\n');
    Error.stackTraceLimit = limit;
    // Lines: the message, this function, the condition's eval, the function called; then what called it.
    const below = stack.slice(4).map((l) => FRAME.exec(l.trim())).map((m) => m?.[1] ?? m?.[2])
      .filter((u) => u?.startsWith(SRC)).map((u) => relative(ROOT, fileURLToPath(u!)));
    const call: Call = { file: probe.file, top: probe.top };
    if (!below.includes(probe.file)) call.from = below.filter((f, at) => f !== below[at - 1]);
    calls.push(call);
  };
  post('Debugger.enable');
  probes.forEach((probe, i) => post('Debugger.setBreakpointByUrl', {
    url: pathToFileURL(join(ROOT, probe.file)).href, lineNumber: probe.line, columnNumber: probe.column,
    condition: `globalThis.__svcWalkOrder(${i}), false`,
  }));
  return { calls, stop: () => session.disconnect() };
}

/** A doubling back: control came into a file from a second file, to run a function it had not run before. */
export interface DoublingBack { file: string; top: string; from: string; first: string }

/**
 * The doublings back of a walk's calls, in order, among the files `counted` says count (what ran in the others is
 * read where it is called). Control enters a counted file when a function of it starts with no frame of that file
 * below; it enters from the nearest counted file below, or from the process's start. A file may be entered again
 * from the file that first entered it, and from anywhere to run again what already ran there; a new function of a
 * file entered from elsewhere makes a reader go back to a file they left under another.
 */
export function doublingsBack(calls: readonly Call[], counted: (file: string) => boolean): DoublingBack[] {
  const firstFrom = new Map<string, string>();
  const ran = new Set<string>();
  const out: DoublingBack[] = [];
  for (const call of calls) {
    if (!counted(call.file)) continue;
    const key = `${call.file}#${call.top}`;
    if (call.from) {
      const from = call.from.find(counted) ?? '(start)';
      const first = firstFrom.get(call.file);
      if (first === undefined) firstFrom.set(call.file, from);
      else if (first !== from && !ran.has(key)) out.push({ file: call.file, top: call.top, from, first });
    }
    ran.add(key);
  }
  return out;
}

/** The file of WALK_ORDER_DIR that holds the probes its recording children set. */
const PROBES = 'probes.json';

/** Makes `dir` a WALK_ORDER_DIR whose children set `probes` (see probesOf). */
export function recordInto(dir: string, probes: readonly Probe[]): void {
  writeFileSync(join(dir, PROBES), JSON.stringify(probes));
}

/** The pids of the processes that recorded their calls into `dir`. */
export function pidsIn(dir: string): number[] {
  return readdirSync(dir).filter((f) => /^\d+\.json$/.test(f)).map((f) => Number(f.slice(0, -'.json'.length)));
}

/** The calls the processes that wrote into `dir` recorded, in the order of `pids` (the walk's order of processes). */
export function callsIn(dir: string, pids: readonly number[]): Call[] {
  return pids.flatMap((pid) => JSON.parse(readFileSync(join(dir, `${pid}.json`), 'utf8')) as Call[]);
}

/** NODE_OPTIONS for a child that records its calls into WALK_ORDER_DIR (after recordInto). */
export const RECORD_ORDER = `--import=${import.meta.url}`;

/**
 * Asserts the files a walk doubles back into are exactly `known` (sorted), which docs/architecture.md names: a new
 * one fails, and one no longer doubled back into must leave the list. Files, not functions: which of a file's
 * functions a run reaches first may wait on a child (a sandbox's namespace ended before or after its check).
 */
export function assertDoublingsBack(
  path: string, calls: readonly Call[], counted: (file: string) => boolean, known: readonly string[],
): void {
  const found = doublingsBack(calls, counted);
  assert.deepEqual([...new Set(found.map((d) => d.file))].sort(), [...known].sort(),
    `path (${path}) doubles back (docs/architecture.md "Doubling back"):\n` +
    found.map((d) => `${d.file}#${d.top} from ${d.from} (first from ${d.first})`).join('\n'));
}

const out = process.env.WALK_ORDER_DIR;
if (out) {
  const { calls } = recordOrder(JSON.parse(readFileSync(join(out, PROBES), 'utf8')) as Probe[]);
  process.on('exit', () => writeFileSync(join(out, `${process.pid}.json`), JSON.stringify(calls)));
}
