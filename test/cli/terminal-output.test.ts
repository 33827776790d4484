import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, seedRuns, type TestControl } from '../helpers/control-server.ts';
import { safeJson, terminalSafe } from '../../src/safe-json.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
// ESC-based CSI (recolour), the one-byte C1 CSI U+009B (clear screen), BEL, an OSC title change ended by ST, CR, DEL,
// and U+2028, a line break to a reader that splits lines by Unicode (Python's splitlines) that could fake a field.
const HOSTILE = 'Fix \u001b[31mred\u001b[0m \u009b2J bell\u0007 \u001b]0;pwned\u001b\\ back\rover del\u007f nel\u0085' +
  '\u2028x';
const QUESTION = `Which \u009b31mdatabase\u0007?`;
const ERROR = 'boom \u001b[2K\u009bK';

let control: TestControl;
let home: string;
let runId: string;

interface Bytes {
  code: number | null;
  stdout: Buffer;
  stderr: Buffer;
}

/** The CLI's exit and its raw output bytes: decoding first could hide a stray byte behind U+FFFD. */
function svc(args: string[]): Promise<Bytes> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', HOME: home, SVC_CONTROL_URL: control.url },
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr: Buffer.concat(err) }));
  });
}

/** Fails when the bytes hold a C0 control other than newline, DEL, or a C1 control (UTF-8 C2 80–C2 9F, or bare). */
function assertNoRawControls(bytes: Buffer, what: string): string {
  const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  const bad = [...text].find((c) => /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/.test(c));
  assert.equal(bad, undefined, `${what} holds U+${bad?.charCodeAt(0).toString(16).padStart(4, '0')} raw`);
  return text;
}

before(async () => {
  home = mkdtempSync(join(tmpdir(), 'svc-'));
  control = await startTestControl();
  const fields = { status: 'blocked' as const, verdict: null, brief: HOSTILE, question: QUESTION, error: ERROR };
  runId = seedRuns(control.deps, 1, fields)[0]!;
});
after(async () => {
  await control.close();
  rmSync(home, { recursive: true, force: true });
});

describe('CLI output holds no raw terminal control codes', () => {
  it('svc runs show replaces every control code from the brief, question and error', async () => {
    const r = await svc(['runs', 'show', `local/${runId}`]);
    assert.equal(r.code, 0, r.stderr.toString());
    const text = assertNoRawControls(r.stdout, 'stdout');
    // Each run of controls and spaces is one space.
    assert.ok(text.includes('\nbrief      Fix [31mred [0m 2J bell ]0;pwned \\ back over del nel x\n'), text);
    assert.ok(text.includes('\nquestion   Which 31mdatabase ?\n'), text);
    assert.ok(text.includes('\nerror      boom [2K K\n'), text);
  });

  it('svc runs list replaces them in the table', async () => {
    const r = await svc(['runs', 'list']);
    assert.equal(r.code, 0, r.stderr.toString());
    const row = /  Fix \[31mred \[0m 2J bell \]0;pwned \\ back over del nel x\n$/;
    assert.match(assertNoRawControls(r.stdout, 'stdout'), row);
  });

  it('svc runs show --json escapes them, and the JSON still parses to the original text', async () => {
    const r = await svc(['runs', 'show', `local/${runId}`, '--json']);
    assert.equal(r.code, 0, r.stderr.toString());
    const text = assertNoRawControls(r.stdout, 'stdout');
    for (const escaped of ['\\u001b[31m', '\\u009b2J', '\\u0007', '\\r', '\\u007f', '\\u0085']) {
      assert.ok(text.includes(escaped), `missing ${escaped}`);
    }
    const run = JSON.parse(text);
    assert.equal(run.brief, HOSTILE);
    assert.equal(run.question, QUESTION);
    assert.equal(run.error, ERROR);
  });

  it('svc runs list --json escapes them too', async () => {
    const r = await svc(['runs', 'list', '--json']);
    assert.equal(r.code, 0, r.stderr.toString());
    assert.equal(JSON.parse(assertNoRawControls(r.stdout, 'stdout')).items[0].brief, HOSTILE);
  });

  it('an error that quotes the user\'s own argument shows its control codes replaced on stderr', async () => {
    const r = await svc(['runs', 'list', '--status', 'x\u009b2J\u001b[1m']);
    assert.equal(r.code, 2);
    assert.equal(r.stdout.length, 0);
    const text = assertNoRawControls(r.stderr, 'stderr');
    assert.match(text, /^svc runs: Invalid --status "x\uFFFD2J\uFFFD\[1m"/);
  });
});

describe('safeJson and terminalSafe', () => {
  it('safeJson leaves no control, line-separator or bidi-override character raw and round-trips every one', () => {
    for (let code = 0; code < 0x3000; code++) {
      const c = String.fromCharCode(code);
      const text = safeJson({ [c]: [c] }, 2);
      assert.doesNotMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
      assert.deepEqual(JSON.parse(text), { [c]: [c] });
    }
  });

  it('terminalSafe keeps newlines, turns a tab into a space and every other control into U+FFFD', () => {
    assert.equal(terminalSafe('a\tb\nc\u001bd\u009be\u202ef'), 'a b\nc\uFFFDd\uFFFDe\uFFFDf');
  });
});
