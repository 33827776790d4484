// Every command `svc help` lists has a row in the README's commands table, and the operator commands are in their
// command's own help: a command nobody can find is not there.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild } from '../helpers/run-child.ts';

const ROOT = join(import.meta.dirname, '../..');
const CLI = join(ROOT, 'dist/cli.js');

/** svc with `args` in a HOME and working folder of its own, removed after (svc writes ~/.svc there). */
async function svcIn(args: string[]): ReturnType<typeof runChild> {
  const home = mkdtempSync(join(tmpdir(), 'svc-help-'));
  try {
    return await runChild(process.execPath, [CLI, ...args], { cwd: home, env: { PATH: process.env.PATH, HOME: home } });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

async function svc(args: string[]): Promise<string> {
  const r = await svcIn(args);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}

describe('svc help and the README', () => {
  it('gives every command svc help lists a row in the README commands table', async () => {
    const help = await svc(['help']);
    const names = [...help.matchAll(/^ {2}([a-z]+) {2,}/gm)].map((m) => m[1]!);
    assert.ok(names.includes('prune') && names.includes('keys'), help);
    const rows = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').filter((l) => l.startsWith('| `svc '));
    for (const name of names) {
      assert.ok(rows.some((row) => row.includes(`\`svc ${name}`)), `README has no commands-table row for svc ${name}`);
    }
  });

  it('documents the operator commands in their own help', async () => {
    assert.match(await svc(['keys', '--help']), /svc keys rotate \[--revoke\]/);
    assert.match(await svc(['prune', '--help']), /--older-than AGE/);
    assert.match(await svc(['dashboard', '--help']), /svc dashboard stop/);
    assert.match(await svc(['runs', '--help']), /svc runs logs <source>\/<run> \[-f\|--follow\]/);
    assert.match(await svc(['start', '--help']), /--follow, -f/);
    assert.match(await svc(['answer', '--help']), /svc answer \[<source>\/\]<run>/);
  });

  it('says the usage line --help gives when a command is used wrongly', async () => {
    for (const [args, usage] of [
      [['receipt', 'verify'], 'svc receipt: Usage: svc receipt verify <file> [--key PUBLIC_KEY.pem]...\n'],
      [['deploy', 'nothing'], 'svc deploy: Usage: svc deploy record --sha SHA --health STATUS [--finished-at ISO] ' +
        '[--repo DIR]\n'],
    ] as const) {
      const wrong = await svcIn([...args]);
      assert.equal(wrong.code, 2);
      assert.equal(wrong.stderr, usage);
    }
  });

  it('prints the usage on stderr with exit 2 when a command or its subcommand is missing, and on stdout for help',
    async () => {
      for (const args of [[], ['control'], ['trigger'], ['keys'], ['repos'], ['gate'], ['pod']]) {
        const bare = await svcIn(args);
        assert.deepEqual([bare.code, bare.stdout], [2, ''], `svc ${args.join(' ')}`);
        assert.match(bare.stderr, /^Usage:/, `svc ${args.join(' ')}`);
        const asked = await svcIn([...args, 'help']);
        assert.deepEqual([asked.code, asked.stdout, asked.stderr], [0, bare.stderr, ''], `svc ${args.join(' ')} help`);
      }
    });

  it('refuses a flag given an empty value with exit 2, naming the flag, before doing anything', async () => {
    for (const args of [['control', 'serve', '--port', '0', '--host', ''], ['ship', '--repo='],
      ['start', 'say hello', '--repo', ''], ['trigger', 'serve', '--port', '0', '--db', '']]) {
      const empty = await svcIn(args);
      const flag = args.find((a) => a.startsWith('--') && a !== '--port')!.replace('=', '');
      assert.deepEqual([empty.code, empty.stdout, empty.stderr], [2, '', `svc ${args[0]}: ${flag} needs a value\n`],
        args.join(' '));
    }
  });

  it('prints an error as one line, and with the global --verbose its stack after it', async () => {
    const plain = await svcIn(['repos', 'remove']);
    assert.equal(plain.code, 2);
    assert.equal(plain.stderr, 'svc repos: Missing repository: give OWNER/NAME\n');
    const verbose = await svcIn(['repos', '--verbose', 'remove']);
    assert.equal(verbose.code, 2);
    assert.ok(verbose.stderr.startsWith(`${plain.stderr}UsageError: Missing repository: give OWNER/NAME\n    at `));
  });

  it('prints each error of a command used wrongly with the command named once', async () => {
    for (const args of [['start'], ['repos', 'add'], ['repos', 'add', 'acme/api'], ['repos', 'remove'],
      ['deploy', 'record'], ['pod', 'seal'], ['pod', 'seal', '--repo', 'r', '--sealed', 's'], ['worker', 'start']]) {
      const wrong = await svcIn(args);
      assert.equal(wrong.code, 2, wrong.stderr);
      assert.match(wrong.stderr, new RegExp(`^svc ${args[0]}: [^\\n]+\\n$`));
      assert.doesNotMatch(wrong.stderr, /^svc [a-z]+: svc /, `${args.join(' ')} names its command twice`);
    }
  });
});
