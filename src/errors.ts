// Typed errors shared by every layer (DESIGN §8). Each carries a code, which only EXIT_STATUS below and
// src/http/http-error.ts turn into an exit or HTTP status; nothing matches an error by its message text.
// Must not import anything: every floor imports this leaf.

/**
 * The codes of errors that may reach a command's exit (what went wrong, not how to answer it; one class each), and
 * their exit status: 2 when the person must change what they typed or set (the spec's tokenless bind is one), else 1.
 */
const EXIT_STATUS = {
  usage: 2,
  bad_input: 2,
  bad_setting: 2,
  not_found: 1,
  conflict: 1,
  refused: 1,
  unavailable: 1,
  failed: 1,
} as const satisfies Record<string, 1 | 2>;

export type SvcErrorCode = keyof typeof EXIT_STATUS;

/** The base of every typed error; the wire's errors (HttpError, ControlApiError) keep their own codes. */
export class SvcError extends Error {
  readonly code: SvcErrorCode;
  constructor(code: SvcErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** The exit status for an error that ended a command: from its code when it is one of ours, else 1. */
export function exitStatusOf(err: unknown): 1 | 2 {
  return err instanceof SvcError ? EXIT_STATUS[err.code] : 1;
}

function withCode(code: SvcErrorCode) {
  return class extends SvcError {
    constructor(message: string, options?: ErrorOptions) {
      super(code, message, options);
    }
  };
}

/** The command line itself is wrong (unknown flag, missing argument). */
export class UsageError extends withCode('usage') {}
/** Something the command was given (a brief, file, issue URL, repository, run id) cannot be used. */
export class BadInputError extends withCode('bad_input') {}
/** An environment variable or setting holds a value svc cannot work with. */
export class BadSettingError extends withCode('bad_setting') {}
/** The run, file or record the command names does not exist. */
export class NotFoundError extends withCode('not_found') {}
/** The thing to make already exists, or changed under the command. */
export class ConflictError extends withCode('conflict') {}
/** svc will not do it on purpose: a policy, the sandbox requirement or the push target says no. */
export class RefusedError extends withCode('refused') {}
/** Something svc needs is missing or busy: a provider CLI, a port, a server. */
export class UnavailableError extends withCode('unavailable') {}
/** Something svc relied on failed while doing the work: a child process, the network, a remote answer. */
export class FailedError extends withCode('failed') {}
/**
 * svc could not set a run up around its agent (sandbox, gate, checkout). `beforeAgent`: the agent never ran in this
 * attempt, so nothing was written or spent (the one case a worker retries by itself, src/engine/worker.ts).
 */
export class InfraError extends FailedError {
  readonly beforeAgent: boolean;
  constructor(message: string, options: ErrorOptions & { beforeAgent: boolean }) {
    super(message, options);
    this.beforeAgent = options.beforeAgent;
  }
}

/** What a caught value says: an Error's message, else its string form. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// SQLite's primary result codes, as node:sqlite reports them in `errcode` (extended codes keep the primary one in
// their low byte). Busy or locked: another process holds the write lock (an operator's sqlite3 shell, a second server
// on the file) past the short busy timeout (db/open.ts); the same write will succeed later.
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;

/** SQLite's primary result code of a node:sqlite error, else null. */
function sqlitePrimary(err: unknown): number | null {
  if (!(err instanceof Error)) return null;
  const { code, errcode } = err as { code?: unknown; errcode?: unknown };
  return code === 'ERR_SQLITE_ERROR' && typeof errcode === 'number' ? errcode & 0xff : null;
}

export function isDatabaseBusy(err: unknown): boolean {
  const primary = sqlitePrimary(err);
  return primary === SQLITE_BUSY || primary === SQLITE_LOCKED;
}

/** A read or write the disk failed (SQLITE_IOERR_*): how SQLite reports most full disks and quotas it meets, or a bad
 * disk. */
export function isDiskIoError(err: unknown): boolean {
  return sqlitePrimary(err) === SQLITE_IOERR;
}

/**
 * A disk error: a write refused for want of space (SQLite's SQLITE_FULL, a file's ENOSPC or EDQUOT) or a read or write
 * the disk failed (isDiskIoError, which cannot be told from a full disk): the same statement may succeed later.
 */
export function isDiskError(err: unknown): boolean {
  const { code } = err instanceof Error ? err as { code?: unknown } : {};
  return code === 'ENOSPC' || code === 'EDQUOT' || sqlitePrimary(err) === SQLITE_FULL || isDiskIoError(err);
}
