// What a command gets from the entry point: its argv tail, streams and environment, so tests can call it directly.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from '../errors.ts';

export interface CliIo {
  argv: string[];
  env: NodeJS.ProcessEnv;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  verbose: boolean;
}

export type Command = (io: CliIo) => Promise<number>;

type Options = NonNullable<ParseArgsConfig['options']>;

/** util.parseArgs with usage errors turned into exit-2 UsageErrors. */
export function parseFlags<O extends Options>(argv: string[], options: O, allowPositionals = true) {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message.replace(/\. To specify.*$/s, '') : String(err));
  }
}

export function wantsHelp(argv: string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}
