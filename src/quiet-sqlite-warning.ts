// Filters node:sqlite's ExperimentalWarning (noise for CLI users, a non-JSON line in a server's log): import this
// before anything that loads node:sqlite (worker threads then load their SQLite code with a dynamic import).
// The same for stripTypeScriptTypes, which a Control Plane run from its sources calls once to serve the SSE parser.
import { errorMessage } from './errors.ts';

const emitWarning = process.emitWarning.bind(process);
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  const text = errorMessage(warning);
  if (text.includes('SQLite') || text.includes('stripTypeScriptTypes')) return;
  (emitWarning as (...a: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;
