// A write that waited out SQLite's busy timeout because another process holds the database's write lock (an operator's
// sqlite3 shell, a second server on the same file): the request is fine and will succeed later, so it is answered
// 503 unavailable with Retry-After, not 500. node:sqlite reports it as code ERR_SQLITE_ERROR with SQLite's own error
// code in `errcode` (extended codes keep the primary one in their low byte).
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;

export function isDatabaseBusy(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const { code, errcode } = err as { code?: unknown; errcode?: unknown };
  if (code !== 'ERR_SQLITE_ERROR' || typeof errcode !== 'number') return false;
  const primary = errcode & 0xff;
  return primary === SQLITE_BUSY || primary === SQLITE_LOCKED;
}
