// GET/PUT /v1/config: validated, versioned settings; secrets are always redacted on the way out.
import { isJsonObject } from '../../json-value.ts';
import { HttpError } from '../../http/http-error.ts';
import { invalidParam } from '../params.ts';
import { checkBodyKeys, requireJsonObject } from '../../http/body.ts';
import { json } from '../../http/respond.ts';
import { isLocalCaller, isLoopbackHost } from '../../http/guards.ts';
import type { Ctx, Handler } from '../../http/pipeline.ts';
import type { ControlDeps } from '../deps.ts';
import { ConfigVersionConflict } from '../../db/control-stores.ts';
import {
  SETTINGS, mergeConfig, readEffectiveConfig, redactConfig, withDefaults, type ConfigValues,
} from '../config-schema.ts';
import { canonicalJson } from '../../canonical-json.ts';
import { noteAudit } from '../audited.ts';
import { controlRunProviders } from '../../engine/config.ts';

// Any token holder may read the settings, but the repositories' paths and the providers' commands only a caller on
// this machine, as /v1/repos and /v1/projects (main.ts binds by the same rule as the pipeline's loopback check).
function reply(ctx: Ctx<ControlDeps>, config: ConfigValues, version: number) {
  const local = isLocalCaller(ctx.req, isLoopbackHost(ctx.deps.settings.host));
  return json(200, { config: redactConfig(config, local ? 'local' : 'remote'), version }, { etag: `"${version}"` });
}

export const getConfig: Handler<ControlDeps> = (ctx) => {
  const { config, version } = readEffectiveConfig(ctx.deps.stores.config);
  return reply(ctx, config, version);
};

function parseIfMatch(header: string | undefined): number | undefined {
  if (header === undefined) return undefined;
  const m = /^\s*(?:W\/)?"?(\d{1,15})"?\s*$/.exec(header);
  if (!m) invalidParam('If-Match must be the config version from GET /v1/config, e.g. "3"');
  return Number(m[1]);
}

function updateOf(body: unknown): { update: Record<string, unknown>; version: number | undefined } {
  const record = requireJsonObject(body);
  if (!Object.hasOwn(record, 'config')) return { update: record, version: undefined };
  checkBodyKeys(record, ['config', 'version'], 'next to "config"');
  const { config, version } = record;
  if (!isJsonObject(config)) invalidParam('Field "config" must be an object of settings');
  if (version !== undefined && (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 0)) {
    invalidParam('Field "version" must be a non-negative integer');
  }
  return { update: config as Record<string, unknown>, version };
}

/** Only settings that differ from their default: a later release's better default reaches untouched keys. */
function storedForm(effective: ConfigValues): ConfigValues {
  const out: ConfigValues = {};
  for (const s of SETTINGS) {
    if (canonicalJson(effective[s.key]) !== canonicalJson(s.default)) out[s.key] = effective[s.key];
  }
  return out;
}

export const putConfig: Handler<ControlDeps> = (ctx) => {
  const { update, version: bodyVersion } = updateOf(ctx.body);
  const headerVersion = parseIfMatch(ctx.req.headers['if-match']);
  if (headerVersion !== undefined && bodyVersion !== undefined && headerVersion !== bodyVersion) {
    invalidParam('If-Match and "version" disagree');
  }
  const expected = headerVersion ?? bodyVersion;
  // Names only (never values: secrets), capped so a hostile body cannot bloat the audit chain.
  noteAudit(ctx, { keys: Object.keys(update).slice(0, 32).map((k) => k.slice(0, 64)) });
  let effective: ConfigValues = {};
  try {
    const saved = ctx.deps.stores.config.update((stored) => {
      effective = mergeConfig(withDefaults(stored), update, (setting) => controlRunProviders(ctx.deps.env, setting));
      return storedForm(effective);
    }, expected);
    return reply(ctx, effective, saved.version);
  } catch (err) {
    if (err instanceof ConfigVersionConflict) {
      throw new HttpError(
        'conflict', `Config changed since version ${expected} (now ${err.current}); read it again and retry`,
      );
    }
    throw err;
  }
};
