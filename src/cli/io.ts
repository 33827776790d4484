// What a command gets from the entry point (its argv tail, streams and environment), and its argument parsing.
import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { BadInputError, UsageError, errorMessage } from '../errors.ts';
import { oneOf } from '../untrusted.ts';

export interface CliIo {
  argv: string[];
  env: NodeJS.ProcessEnv;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** util.parseArgs with usage errors, and more than `maxPositionals` arguments, turned into exit-2 UsageErrors. */
export function parseFlags<O extends Options>(argv: string[], options: O, maxPositionals = Infinity) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(errorMessage(err).replace(/\. To specify.*$/s, ''));
  }
  const extra = parsed.positionals[maxPositionals];
  if (extra !== undefined) throw new UsageError(`Unexpected argument "${extra}"`);
  // An empty value is a mistake, never a choice: `--host ''` bound every interface, `--db ''` a throwaway database.
  for (const [name, value] of Object.entries(parsed.values)) {
    if (value === '' || (Array.isArray(value) && value.includes(''))) throw new UsageError(`--${name} needs a value`);
  }
  return parsed;
}

/** A command's usage line as its help gives it (the first line), so a usage error never says less than --help. */
export function usageOf(help: string): string {
  return help.slice(0, help.indexOf('\n'));
}

/**
 * The subcommand (one of `subs`) and its arguments, or the exit status after help: `svc X help` prints it on stdout
 * (exit 0); `svc X` alone is a usage error, so its help goes to stderr (exit 2), never into a pipe's output.
 */
export function subcommand<S extends string>(
  io: CliIo, help: string, command: string, subs: readonly S[],
): { sub: S; rest: string[] } | number {
  const [sub, ...rest] = io.argv;
  if (sub === undefined) {
    io.stderr(help);
    return 2;
  }
  if (sub === 'help') {
    io.stdout(help);
    return 0;
  }
  const known = oneOf(sub, subs);
  if (known === null) throw new UsageError(`Unknown subcommand "${command} ${sub}" (expected ${subs.join(', ')})`);
  return { sub: known, rest };
}

/** Why a file named on the command line could not be read, as a person would say it. */
const UNREADABLE: Readonly<Record<string, string>> = {
  ENOENT: 'there is no such file', ENOTDIR: 'there is no such file', EISDIR: 'it is a folder, not a file',
  EACCES: 'it is not readable by this user', EPERM: 'it is not readable by this user',
};

/** The text of the file `path` the person named; else a BadInputError (exit 2) saying why and what to give instead. */
export function readGivenFile(path: string, instead: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    const why = UNREADABLE[code] ?? `it could not be read (${code || errorMessage(err)})`;
    throw new BadInputError(`Cannot read "${path}": ${why}; ${instead}`, { cause: err });
  }
}
