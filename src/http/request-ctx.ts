// The handler context as one small class: url, query and requestId are prototype getters built on first use, so a
// request that never reads them (most: /health, static files) pays for no URL object, no query parse and no UUID.
// An object literal with getters would allocate fresh accessor closures per request and cost more than it saves.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { RequestTarget } from './guards.ts';

/** One request's id, made on first use (audit, logs, a 500 answer) and the same every time after. */
export class RequestId {
  #id: string | undefined;
  get(): string {
    return (this.#id ??= randomUUID());
  }
}

export class RequestCtx<D> {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  params: Record<string, string>;
  body: unknown;
  raw: Buffer | undefined;
  peer: string;
  runnerSource: string | undefined;
  deps: D;
  #target: RequestTarget;
  #id: RequestId;

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    target: RequestTarget,
    params: Record<string, string>,
    id: RequestId,
    deps: D,
  ) {
    this.req = req;
    this.res = res;
    this.method = method;
    this.params = params;
    this.body = undefined;
    this.raw = undefined;
    this.peer = req.socket.remoteAddress ?? '';
    this.runnerSource = undefined;
    this.deps = deps;
    this.#target = target;
    this.#id = id;
  }

  get url(): URL {
    return this.#target.url();
  }

  get query(): URLSearchParams {
    return this.#target.query();
  }

  get requestId(): string {
    return this.#id.get();
  }
}
