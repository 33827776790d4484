// Wraps a mutating handler so every call that reaches it — done, refused or crashed — lands in the audit hash chain,
// and records the calls the pipeline's guards turn away after matching such a route (bad token 401, loopback 403,
// Origin 403, 415, 413, invalid JSON) through recordRefusal. A wrong Host (403) or unknown route (404/405) names no
// action and is not recorded.
import type { IncomingMessage } from 'node:http';
import type { Ctx, Handler, Refusal } from '../http/pipeline.ts';
import type { HandlerResult } from '../http/respond.ts';
import { TAKEN_OVER } from '../http/respond.ts';
import { isHttpError } from '../http/http-error.ts';
import { isLoopbackAddress, proxyHeaderOf } from '../http/guards.ts';
import type { ControlDeps } from './deps.ts';
import { errorMessage } from '../errors.ts';

const notes = new WeakMap<object, Record<string, unknown>>();

/** Lets a handler add facts to its audit entry (e.g. which settings changed) — never secrets or bodies. */
export function noteAudit(ctx: object, detail: Record<string, unknown>): void {
  notes.set(ctx, { ...notes.get(ctx), ...detail });
}

/**
 * Who acted, never with what: `runner:<source>` for a runner token, `token` when the server has a token (the pipeline
 * already checked it, so reaching a
 * handler proves it was valid), else `local` for a loopback peer that no proxy relayed and `anonymous` for anyone else.
 */
export function actorOf(ctx: Ctx<ControlDeps>): string {
  if (ctx.runnerSource !== undefined) return `runner:${ctx.runnerSource}`;
  if (ctx.deps.settings.token) return 'token';
  return localPeer(ctx.peer, ctx.req) ? 'local' : 'anonymous';
}

/** A same-host reverse proxy connects from loopback too; its Forwarded/X-Forwarded-* headers say it is not local. */
function localPeer(peer: string, req: IncomingMessage): boolean {
  return isLoopbackAddress(peer) && proxyHeaderOf(req) === undefined;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

function field(value: unknown, key: string): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const v = (value as Record<string, unknown>)[key];
  return typeof v === 'string' && NAME.test(v) ? v : undefined;
}

function runOf(holder: unknown): string | null {
  const source = field(holder, 'source');
  const run = field(holder, 'run');
  return source && run ? `${source}/${run}` : null;
}

/**
 * `source/run` from the path, else from the body (merge queue), else from the reply (a started run), else the source.
 */
export function targetOf(ctx: Ctx<ControlDeps>, action: string, reply: unknown): string | null {
  if (action.startsWith('config.')) return 'config';
  return runOf(ctx.params) ?? runOf(ctx.body) ?? runOf(reply) ?? field(ctx.body, 'source') ?? null;
}

function outcomeOf(result: HandlerResult): { outcome: string; status: number } {
  if (result === TAKEN_OVER) return { outcome: 'ok', status: 200 };
  const code = field((result.body as { error?: unknown } | undefined)?.error, 'code');
  if (result.status < 400) return { outcome: 'ok', status: result.status };
  return { outcome: code ?? String(result.status), status: result.status };
}

/** The audit action name of each handler made by audited(); a route whose handler has none is not audited. */
const actions = new WeakMap<Handler<ControlDeps>, string>();

/**
 * Audits a mutating call the pipeline refused before its handler ran. The actor is `unauthenticated` for a missing or
 * wrong token (nothing proves who sent it), else as for any call. Refusals are counted, not each written: the first of
 * a kind per window is a row, its repeats one more row with their count (refusal-tally.ts, docs/control-config.md).
 */
export function recordRefusal(deps: ControlDeps, info: Refusal<ControlDeps>): void {
  const action = actions.get(info.route.handler);
  if (!action) return;
  const actor = info.error.code === 'unauthorized' ? 'unauthenticated'
    : deps.settings.token ? 'token'
    : localPeer(info.peer, info.req) ? 'local' : 'anonymous';
  const input = {
    actor,
    peer: info.peer,
    action,
    target: action.startsWith('config.') ? 'config' : runOf(info.params),
    outcome: info.error.code,
    detail: { status: info.error.status, request_id: info.requestId, refused_by: 'pipeline' },
  };
  if (deps.refusals) deps.refusals.record(input);
  else deps.stores.audit.append(input);
}

export function audited(action: string, handler: Handler<ControlDeps>): Handler<ControlDeps> {
  actions.set(auditedHandler, action);
  return auditedHandler;
  async function auditedHandler(ctx: Ctx<ControlDeps>): Promise<HandlerResult> {
    let result: HandlerResult | undefined;
    let failure: unknown;
    let failed = false;
    try {
      result = await handler(ctx);
    } catch (err) {
      failure = err;
      failed = true;
    }
    const { outcome, status } = failed
      ? isHttpError(failure)
        ? { outcome: failure.code, status: failure.status }
        : { outcome: 'internal_error', status: 500 }
      : outcomeOf(result!);
    const replyBody = !failed && result !== TAKEN_OVER ? result?.body : undefined;
    try {
      ctx.deps.stores.audit.append({
        actor: actorOf(ctx),
        peer: ctx.peer,
        action,
        target: targetOf(ctx, action, replyBody),
        outcome,
        detail: { status, request_id: ctx.requestId, ...notes.get(ctx) },
      });
    } catch (err) {
      // The action already happened; losing its audit row is logged loudly rather than turning success into a 500.
      ctx.deps.log.error('audit append failed', { request_id: ctx.requestId, action, error: errorMessage(err) });
    }
    if (failed) throw failure;
    return result!;
  }
}
