// Typed errors shared by every layer (DESIGN §8). Each carries a code; only src/cli/exit-status.ts turns a code into an
// exit status and only src/http/http-error.ts into an HTTP status, so no layer below chooses either, and nothing
// matches an error by its message text. Must not import anything: every floor imports this leaf.

/**
 * The codes of errors that may reach a command's exit: what went wrong, not how to answer it.
 * - usage: the command line itself is wrong (unknown flag, missing argument)
 * - bad_input: something the command was given (a brief, a file, an issue URL, a repository, a run id) cannot be used
 * - bad_setting: an environment variable or setting has a value svc cannot work with
 * - not_found: the run, file or record the command names does not exist
 * - conflict: the thing to make already exists, or changed under the command
 * - refused: svc will not do it on purpose (policy, sandbox, push target)
 * - unavailable: something svc needs is missing or busy (a provider CLI, a port, a server)
 * - failed: something svc relied on failed while doing it (a child process, the network, a remote answer)
 */
export const ERROR_CODES = [
  'usage', 'bad_input', 'bad_setting', 'not_found', 'conflict', 'refused', 'unavailable', 'failed',
] as const;

export type SvcErrorCode = (typeof ERROR_CODES)[number];

/**
 * The base of every typed error in svc; `code` is what callers and tests look at, never `message`. The wire's errors
 * keep their own codes: HttpError (src/http/http-error.ts, the envelope a server answers) and ControlApiError
 * (src/client/client.ts, the envelope a client received); the CLI turns the latter into one of these.
 */
export class SvcError<C extends SvcErrorCode = SvcErrorCode> extends Error {
  readonly code: C;
  constructor(code: C, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

export function isSvcError(value: unknown): value is SvcError {
  return value instanceof SvcError;
}

/** The command line is wrong; the CLI prints the message (and usually the command's usage). */
export class UsageError extends SvcError<'usage'> {
  constructor(message: string, options?: ErrorOptions) {
    super('usage', message, options);
  }
}

/** What the command was given (a brief, file, URL, repository, run id) cannot be used. */
export class BadInputError extends SvcError<'bad_input'> {
  constructor(message: string, options?: ErrorOptions) {
    super('bad_input', message, options);
  }
}

/** An environment variable or setting holds a value svc cannot work with. */
export class BadSettingError extends SvcError<'bad_setting'> {
  constructor(message: string, options?: ErrorOptions) {
    super('bad_setting', message, options);
  }
}

export class NotFoundError extends SvcError<'not_found'> {
  constructor(message: string, options?: ErrorOptions) {
    super('not_found', message, options);
  }
}

export class ConflictError extends SvcError<'conflict'> {
  constructor(message: string, options?: ErrorOptions) {
    super('conflict', message, options);
  }
}

/** svc will not do it on purpose: a policy, the sandbox requirement or the push target says no. */
export class RefusedError extends SvcError<'refused'> {
  constructor(message: string, options?: ErrorOptions) {
    super('refused', message, options);
  }
}

/** Something svc needs is missing or busy: a provider CLI, a port, a server. */
export class UnavailableError extends SvcError<'unavailable'> {
  constructor(message: string, options?: ErrorOptions) {
    super('unavailable', message, options);
  }
}

/** Something svc relied on failed while doing the work: a child process, the network, a remote answer. */
export class FailedError extends SvcError<'failed'> {
  constructor(message: string, options?: ErrorOptions) {
    super('failed', message, options);
  }
}

/** What a caught value says, for a log line or a message: an Error's message, else its string form. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
