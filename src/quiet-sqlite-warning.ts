// Filters node:sqlite's ExperimentalWarning (noise for CLI users, a non-JSON line in a server's log): import this
// before anything that loads node:sqlite (worker threads then load their SQLite code with a dynamic import).
import { errorMessage } from './errors.ts';

const emitWarning = process.emitWarning.bind(process);
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  if (errorMessage(warning).includes('SQLite')) return;
  (emitWarning as (...a: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;
