// One JSON object per line on stderr; callers pass fields, never secrets (STYLE: Processes).
import { safeJson } from './safe-json.ts';

/** A line's own fields; the logger's four come first and are never repeated. */
type Fields = Record<string, unknown> & { ts?: never; level?: never; name?: never; msg?: never };
type Write = (msg: string, fields?: Fields) => void;

export interface Logger {
  info: Write;
  warn: Write;
  error: Write;
}

// A line's time, made once per millisecond: a busy server's access log writes several lines in each.
let stampMs = NaN;
let stamp = '';
function now(): string {
  const ms = Date.now();
  if (ms !== stampMs) {
    stampMs = ms;
    stamp = new Date(ms).toISOString();
  }
  return stamp;
}

export function createLogger(name: string, write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  // The same JSON as safeJson({ ts, level, name, msg, ...fields }) without a merged object per line (the access log
  // writes one per request): the fixed part is made once, the fields are their own safeJson with its brace opened.
  const at = (level: string): Write => {
    const head = `","level":${safeJson(level)},"name":${safeJson(name)},"msg":`;
    return (msg, fields) => {
      const own = fields === undefined ? '{}' : safeJson(fields);
      const tail = own === '{}' ? '}' : `,${own.slice(1)}`;
      write(`{"ts":"${now()}${head}${safeJson(msg)}${tail}\n`);
    };
  };
  return { info: at('info'), warn: at('warn'), error: at('error') };
}

export const silentLogger: Logger = createLogger('silent', () => {});
