// One JSON object per line on stderr; callers pass fields, never secrets (STYLE: Processes).
import { safeJson } from './safe-json.ts';

type Write = (msg: string, fields?: Record<string, unknown>) => void;

export type Logger = Record<'info' | 'warn' | 'error', Write>;

export function createLogger(name: string, write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const at = (level: string): Write => (msg, fields = {}) =>
    write(safeJson({ ts: new Date().toISOString(), level, name, msg, ...fields }) + '\n');
  return { info: at('info'), warn: at('warn'), error: at('error') };
}

export const silentLogger: Logger = createLogger('silent', () => {});
