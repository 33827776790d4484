// The JSON-RPC 2.0 envelope MCP speaks over /mcp (mcp.ts): reading one message, answering a result or an error.
import { HttpError } from '../http/http-error.ts';
import { json, type Reply } from '../http/respond.ts';
import { BadInputError } from '../errors.ts';
import { isJsonObject, type Obj } from '../json-value.ts';

export type Id = string | number;

/** JSON-RPC 2.0 §5.1 codes and MCP's own. */
export const RPC = {
  INVALID_REQUEST: -32600, METHOD_NOT_FOUND: -32601, INVALID_PARAMS: -32602, INTERNAL_ERROR: -32603,
  RESOURCE_NOT_FOUND: -32002, HEADER_MISMATCH: -32020, UNSUPPORTED_VERSION: -32022,
} as const;

/** A JSON-RPC error answer; `status` is 400 or 404 where revision 2026-07-28 refuses the HTTP request itself. */
export class JsonRpcError extends BadInputError {
  readonly rpcCode: number;
  readonly id: Id | undefined;
  readonly status: number;
  readonly data: unknown;
  constructor(rpcCode: number, message: string, id?: Id, status = 200, data?: unknown) {
    super(message);
    this.rpcCode = rpcCode;
    this.id = id;
    this.status = status;
    this.data = data;
  }
}

export type Message =
  | { kind: 'request'; id: Id; method: string; params: Obj }
  | { kind: 'notification'; method: string; params: Obj }
  | { kind: 'response' };

function isId(value: unknown): value is Id {
  return (typeof value === 'string' && value.length <= 256) || Number.isSafeInteger(value);
}

/** One JSON-RPC message; a malformed request whose id can be read is answered in JSON-RPC, anything else is 400. */
export function readMessage(body: unknown): Message {
  if (Array.isArray(body)) throw new HttpError('bad_request', 'JSON-RPC batches are not part of MCP since 2025-06-18');
  if (!isJsonObject(body)) throw new HttpError('bad_request', 'Body must be a JSON-RPC message object');
  const { id, method, params } = body;
  const hasId = Object.hasOwn(body, 'id');
  const answerable = hasId && isId(id);
  const invalid = (why: string): never => {
    if (answerable) throw new JsonRpcError(RPC.INVALID_REQUEST, why, id);
    throw new HttpError('bad_request', `Not a JSON-RPC 2.0 message: ${why}`);
  };
  if (body.jsonrpc !== '2.0') invalid('"jsonrpc" must be "2.0"');
  if (method === undefined) {
    const settles = Object.hasOwn(body, 'result') !== Object.hasOwn(body, 'error');
    return answerable && settles ? { kind: 'response' } : invalid('neither a request, a notification nor a response');
  }
  if (typeof method !== 'string') invalid('"method" must be a string');
  if (params !== undefined && !isJsonObject(params)) invalid('"params" must be an object');
  const read = { method: method as string, params: (params as Obj | undefined) ?? {} };
  if (!hasId) return { kind: 'notification', ...read };
  if (!answerable) invalid('"id" must be a string or an integer');
  return { kind: 'request', id: id as Id, ...read };
}

export function rpcResult(id: Id, result: unknown, headers: Record<string, string> = {}): Reply {
  return json(200, { jsonrpc: '2.0', id, result }, headers);
}

export function rpcError(id: Id | undefined, code: number, message: string, status = 200, data?: unknown): Reply {
  const error = { code, message, ...(data === undefined ? {} : { data }) };
  return json(status, { jsonrpc: '2.0', ...(id === undefined ? {} : { id }), error });
}
