// One JSON object per line on stderr; callers pass fields, never secrets (STYLE: Processes).
import { safeJson } from './safe-json.ts';

export type Level = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  log(level: Level, msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export function createLogger(name: string, write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  function log(level: Level, msg: string, fields: Record<string, unknown> = {}): void {
    write(safeJson({ ts: new Date().toISOString(), level, name, msg, ...fields }) + '\n');
  }
  return {
    log,
    info: (msg, f) => log('info', msg, f),
    warn: (msg, f) => log('warn', msg, f),
    error: (msg, f) => log('error', msg, f),
  };
}

export const silentLogger: Logger = createLogger('silent', () => {});
