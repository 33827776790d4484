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

/** Runner tokens (README): every problem names its line, never the token. */
export function parseRunnerTokens(text: string): RunnerCredential[] {
  const tokens: RunnerCredential[] = [];
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

export function readRunnerTokens(file: string | undefined): RunnerCredential[] {
  return file ? parseRunnerTokens(settingFile('SVC_CONTROL_RUNNER_TOKENS_FILE', file)) : [];
}
