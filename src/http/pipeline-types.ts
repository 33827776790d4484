// The pipeline's types, apart from its code so the pieces of the pipeline (pipeline.ts, pipeline-failure.ts) share
// them without importing each other in a circle.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Method } from './router.ts';
import type { HttpError } from './http-error.ts';
import type { HandlerResult } from './respond.ts';
import type { RunnerCredential } from './guards.ts';
import type { StaticFiles } from './static-files.ts';
import type { Logger } from '../log.ts';

export interface Ctx<D> {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  url: URL;
  params: Record<string, string>;
  query: URLSearchParams;
  /** Parsed JSON body for `body: 'json'` routes. */
  body: unknown;
  /** Raw bytes for `body: 'raw'` and `body: 'json'` routes. */
  raw: Buffer | undefined;
  peer: string;
  requestId: string;
  /** Set when a runner token (not the server's own) authenticated the request: the source it may act for. */
  runnerSource: string | undefined;
  deps: D;
}

export type Handler<D> = (ctx: Ctx<D>) => HandlerResult | Promise<HandlerResult>;

export interface Route<D> {
  method: Method;
  pattern: string;
  handler: Handler<D>;
  /** Bearer token required when the server has one (default: true for /v1/*). */
  auth?: boolean;
  loopbackOnly?: boolean;
  /** Runner tokens (PipelineOptions.runnerTokens) are accepted here too; the handler checks ctx.runnerSource. */
  runner?: boolean;
  /** 'json' enforces content type and parses; 'raw' hands over bytes; default none (body ignored). */
  body?: 'json' | 'raw' | 'optional-json';
  limit?: number;
}

export interface PipelineOptions<D> {
  routes: ReadonlyArray<Route<D>>;
  deps: D;
  boundToLoopback: () => boolean;
  token?: string | undefined;
  /** Tokens that open only `runner` routes, each for one source. */
  runnerTokens?: readonly RunnerCredential[];
  ownOrigins?: () => ReadonlySet<string>;
  staticFiles?: StaticFiles;
  log: Logger;
  /** Refuse a body still arriving after this many ms (slow-body guard); readBody's default otherwise. */
  bodyTimeoutMs?: number;
  /**
   * Told about a mutating request that matched a route but was refused before its handler ran (401, 403, 415, 413,
   * 400 invalid_json): the Control Plane audits those. Errors from the handler itself never reach it.
   */
  onRefused?: (info: Refusal<D>) => void;
}

export interface Refusal<D> {
  route: Route<D>;
  params: Record<string, string>;
  method: string;
  req: IncomingMessage;
  peer: string;
  requestId: string;
  error: HttpError;
}

/** Set while a request is between its route match and its handler; only allocated when onRefused is set. */
export interface Admission<D> {
  route?: Route<D> | undefined;
  params?: Record<string, string>;
}
