// Every call of a mutating handler (done, refused or crashed) and every such call the guards turn away lands in the
// audit hash chain (docs/control-config.md, "Audit log").
import type { IncomingMessage } from 'node:http';
import { refusalOf, type Ctx, type Handler, type Refusal } from '../http/pipeline.ts';
import type { HandlerResult } from '../http/respond.ts';
import { TAKEN_OVER } from '../http/respond.ts';
import { isLoopbackAddress, proxyHeaderOf } from '../http/guards.ts';
import type { ControlDeps } from './deps.ts';
import { errorMessage } from '../errors.ts';
import { isValidSegment } from '../engine/ids.ts';
import { obj } from '../untrusted.ts';

const notes = new WeakMap<object, Record<string, unknown>>();
/** The audit action name of each handler made by audited(); a route whose handler has none is not audited. */
const actions = new WeakMap<Handler<ControlDeps>, string>();

/** Lets a handler add facts to its audit entry (e.g. which settings changed) — never secrets or bodies. */
export function noteAudit(ctx: object, detail: Record<string, unknown>): void {
  notes.set(ctx, { ...notes.get(ctx), ...detail });
}

/** Who acted, never with what. A same-host reverse proxy connects from loopback too; its headers say so. */
export function actorOf(deps: ControlDeps, peer: string, req: IncomingMessage, runnerSource?: string): string {
  if (runnerSource !== undefined) return `runner:${runnerSource}`;
  if (deps.settings.token) return 'token';
  return isLoopbackAddress(peer) && proxyHeaderOf(req) === undefined ? 'local' : 'anonymous';
}

function field(value: unknown, key: string): string | undefined {
  const v = obj(value)[key];
  return isValidSegment(v) ? v : undefined;
}

function runOf(holder: unknown): string | null {
  const source = field(holder, 'source');
  const run = field(holder, 'run');
  return source && run ? `${source}/${run}` : null;
}

function targetOf(ctx: Ctx<ControlDeps>, action: string, reply: unknown): string | null {
  if (action.startsWith('config.')) return 'config';
  return runOf(ctx.params) ?? runOf(ctx.body) ?? runOf(reply) ?? field(ctx.body, 'source') ?? null;
}

function outcomeOf(result: HandlerResult): { outcome: string; status: number } {
  if (result === TAKEN_OVER) return { outcome: 'ok', status: 200 };
  if (result.status < 400) return { outcome: 'ok', status: result.status };
  const code = field((result.body as { error?: unknown } | undefined)?.error, 'code');
  return { outcome: code ?? String(result.status), status: result.status };
}

/** A mutating call refused before its handler ran (`by`: the MCP tool layer did); nothing proves who sent a 401. */
export function recordRefusal(deps: ControlDeps, info: Refusal<ControlDeps>, by: Record<string, unknown> = {}): void {
  const action = actions.get(info.route.handler);
  if (!action) return;
  deps.refusals.record({
    actor: info.error.code === 'unauthorized' ? 'unauthenticated' : actorOf(deps, info.peer, info.req),
    peer: info.peer,
    action,
    target: action.startsWith('config.') ? 'config' : runOf(info.params),
    outcome: info.error.code,
    detail: { status: info.error.status, request_id: info.requestId, refused_by: 'pipeline', ...by },
  });
}

export function audited(action: string, handler: Handler<ControlDeps>): Handler<ControlDeps> {
  actions.set(auditedHandler, action);
  return auditedHandler;
  async function auditedHandler(ctx: Ctx<ControlDeps>): Promise<HandlerResult> {
    let result: HandlerResult;
    try {
      result = await handler(ctx);
    } catch (err) {
      // As the pipeline answers it: a typed svc error is its refusal (http-error.ts), a busy database or a disk error a
      // 503, anything else a 500.
      const known = refusalOf(err);
      const crashed = { outcome: 'internal_error', status: 500 };
      append(ctx, action, known ? { outcome: known.code, status: known.status } : crashed, undefined);
      throw err;
    }
    append(ctx, action, outcomeOf(result), result === TAKEN_OVER ? undefined : result.body);
    return result;
  }
}

function append(ctx: Ctx<ControlDeps>, action: string, end: { outcome: string; status: number }, reply: unknown): void {
  try {
    ctx.deps.stores.audit.append({
      actor: actorOf(ctx.deps, ctx.peer, ctx.req, ctx.runner?.source),
      peer: ctx.peer,
      action,
      target: targetOf(ctx, action, reply),
      outcome: end.outcome,
      detail: { status: end.status, request_id: ctx.requestId, ...notes.get(ctx) },
    });
  } catch (err) {
    // The action already happened: a lost audit row is logged loudly, not turned into a 500.
    ctx.deps.log.error('audit append failed', { request_id: ctx.requestId, action, error: errorMessage(err) });
  }
}
