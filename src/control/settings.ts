// Control Plane settings resolved from flags and environment in one place; only main.ts and the CLI call this.
import { join } from 'node:path';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { readConnectionLimits } from '../http/http-server.ts';
import type { RunnerCredential } from '../http/guards.ts';
import { BadSettingError } from '../errors.ts';
import {
  controlTokenSetting, setting, settingChoice, settingFile, settingInt, settingOr,
} from '../settings-registry.ts';
import { SEGMENT } from '../run-json.ts';
import { answerDirOf } from '../engine/answers.ts';

export type ControlSettings = ReturnType<typeof resolveControlSettings>;

export function resolveControlSettings(
  env: NodeJS.ProcessEnv,
  flags: { host?: string | undefined; port?: string | undefined; db?: string | undefined },
) {
  const home = svcHomeOf(env);
  const token = controlTokenSetting(env);
  const runnerTokens = readRunnerTokens(setting(env, 'SVC_CONTROL_RUNNER_TOKENS_FILE'));
  // Without the Control Plane's own token every route is open, so a runner token would restrict nothing.
  if (runnerTokens.length && !token) throw new RunnerTokensError('runner tokens need SVC_CONTROL_TOKEN (or its _FILE)');
  if (runnerTokens.some((r) => r.token === token)) {
    throw new RunnerTokensError('a runner token equals SVC_CONTROL_TOKEN');
  }
  const streams = settingInt(env, 'SVC_CONTROL_MAX_STREAMS');
  // Read by the merge queue and by every run this server launches: a malformed one stops it now (exit 2), as the
  // trigger server's does, rather than failing each of those.
  setting(env, 'GITHUB_API_URL');
  return {
    host: flags.host ?? settingOr(env, 'SVC_CONTROL_HOST'),
    port: settingInt(env, 'SVC_CONTROL_PORT', { flag: flags.port }),
    dbPath: flags.db ?? setting(env, 'SVC_CONTROL_DB') ?? join(home, 'control', 'control.db'),
    token,
    allowInsecureBind: settingChoice(env, 'SVC_CONTROL_ALLOW_INSECURE_BIND') === '1',
    answerDir: answerDirOf(env),
    svcHome: home,
    source: settingOr(env, 'SVC_SOURCE'),
    runnerTokens,
    connections: readConnectionLimits(env, 'control'),
    streams: { total: streams, perRun: settingInt(env, 'SVC_CONTROL_MAX_STREAMS_PER_RUN', { max: streams }) },
    // An environment setting, not a PUT /v1/config one: whoever may change settings must not be able to shorten
    // the record of their own changes.
    auditRetentionDays: settingInt(env, 'SVC_CONTROL_AUDIT_RETENTION_DAYS'),
    accessLog: settingChoice(env, 'SVC_ACCESS_LOG') === '1',
  };
}

/** Long enough to be a real secret; `openssl rand -hex 32` gives 64. */
const MIN_TOKEN_LENGTH = 24;

export class RunnerTokensError extends BadSettingError {
  constructor(message: string) {
    super(`SVC_CONTROL_RUNNER_TOKENS_FILE: ${message}`);
  }
}

const LINE = '<source> <token> [bound-runs] [read=<source>,…]';

/**
 * A line's words after the token: `bound-runs`, a pod's run container's token, writes only runs already stored and
 * bound to the key its batch carries and nothing source-wide (src/control/ingest-apply.ts); `read=<source>,…` also
 * reads runs of those sources one at a time (a trigger's, of its pods' runs). Null: a word that is neither.
 */
function readGrants(words: readonly string[]): { boundRuns: boolean; reads: string[] } | null {
  const grants = { boundRuns: false, reads: [] as string[] };
  for (const word of words) {
    const reads = word.startsWith('read=') ? word.slice('read='.length).split(',') : null;
    if (word === 'bound-runs') grants.boundRuns = true;
    else if (reads !== null && reads.every((source) => SEGMENT.test(source))) grants.reads.push(...reads);
    else return null;
  }
  return { ...grants, reads: [...new Set(grants.reads)] };
}

/** Runner tokens (README): every problem names its line, never the token. */
export function parseRunnerTokens(text: string): RunnerCredential[] {
  const tokens: RunnerCredential[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const [source, token, ...words] = line.split(/\s+/) as [string, string | undefined, ...string[]];
    const grants = readGrants(words);
    if (token === undefined || grants === null) throw new RunnerTokensError(`line ${i + 1} must be "${LINE}"`);
    if (!SEGMENT.test(source)) throw new RunnerTokensError(`line ${i + 1}: "${source}" is not a valid source name`);
    // A pod's agent can read its `bound-runs` token: with read= it would read every run of the sources named.
    if (grants.boundRuns && grants.reads.length > 0) {
      throw new RunnerTokensError(`line ${i + 1}: a bound-runs token may not also read= (a pod's agent can read it)`);
    }
    if (token.length < MIN_TOKEN_LENGTH) {
      throw new RunnerTokensError(`line ${i + 1}: the token must be at least ${MIN_TOKEN_LENGTH} characters`);
    }
    if (seen.has(token)) throw new RunnerTokensError(`line ${i + 1}: this token is already given to a source`);
    seen.add(token);
    tokens.push({ source, token, ...grants });
  });
  return tokens;
}

export function readRunnerTokens(file: string | undefined): RunnerCredential[] {
  return file ? parseRunnerTokens(settingFile('SVC_CONTROL_RUNNER_TOKENS_FILE', file)) : [];
}
