// Wraps a mutating handler so every call, refused or not, lands in the audit hash chain with actor and peer.
import type { Handler } from '../http/pipeline.ts';
import type { ControlDeps } from './deps.ts';

export function audited(action: string, handler: Handler<ControlDeps>): Handler<ControlDeps> {
  // Placeholder: the audit store lands with the foundation issue; until then the handler runs unaudited.
  void action;
  return handler;
}
