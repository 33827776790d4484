// Runner tokens (SVC_CONTROL_RUNNER_TOKENS_FILE): a token per runner that may only ship its own source's runs.
// A runner — a laptop, a CI job, a Kubernetes job pod whose agent runs next to its shipper — needs POST /v1/ingest
// and nothing else; with the Control Plane's own token it could also change the config, delete or stop any run and
// rewrite other runners' runs. A runner token opens only POST /v1/ingest, and only for batches of its source.
import { BadSettingError } from '../errors.ts';
import { readFileSync } from 'node:fs';
import { SEGMENT } from './params.ts';

export interface RunnerToken {
  source: string;
  token: string;
}

/** Long enough to be a real secret; `openssl rand -hex 32` gives 64. */
const MIN_TOKEN_LENGTH = 24;

export class RunnerTokensError extends BadSettingError {
  constructor(message: string) {
    super(`SVC_CONTROL_RUNNER_TOKENS_FILE: ${message}`);
  }
}

/**
 * One `<source> <token>` per line; blank lines and `#` comments are skipped. Every problem names its line, never the
 * token. A source may have several tokens (rotation); a token may not appear twice.
 */
export function parseRunnerTokens(text: string): RunnerToken[] {
  const tokens: RunnerToken[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const parts = line.split(/\s+/);
    if (parts.length !== 2) throw new RunnerTokensError(`line ${i + 1} must be "<source> <token>"`);
    const [source, token] = parts as [string, string];
    if (!SEGMENT.test(source)) throw new RunnerTokensError(`line ${i + 1}: "${source}" is not a valid source name`);
    if (token.length < MIN_TOKEN_LENGTH) {
      throw new RunnerTokensError(`line ${i + 1}: the token must be at least ${MIN_TOKEN_LENGTH} characters`);
    }
    if (seen.has(token)) throw new RunnerTokensError(`line ${i + 1}: this token is already given to a source`);
    seen.add(token);
    tokens.push({ source, token });
  });
  return tokens;
}

/** The file's tokens, read once at start; unset: none. An unreadable file is an error, not silently no tokens. */
export function readRunnerTokens(file: string | undefined): RunnerToken[] {
  if (!file) return [];
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new RunnerTokensError(`could not be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return parseRunnerTokens(text);
}
