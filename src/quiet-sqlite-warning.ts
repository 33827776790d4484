// node:sqlite prints an ExperimentalWarning when it first loads: noise for CLI users, and a non-JSON line in a
// server's (or its worker threads') stderr log. Importing this module filters that one warning; import it before
// anything that loads node:sqlite (the worker threads then load their SQLite code with a dynamic import).
const emitWarning = process.emitWarning.bind(process);
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  if (String(warning instanceof Error ? warning.message : warning).includes('SQLite')) return;
  (emitWarning as (...a: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;
