// Typed errors shared by every layer (DESIGN §8). Each carries a code; only src/cli/exit-status.ts turns a code into an
// exit status and only src/http/http-error.ts into an HTTP status, so no layer below chooses either, and nothing
// matches an error by its message text. Must not import anything: every floor imports this leaf.

/** The codes of errors that may reach a command's exit: what went wrong, not how to answer it (one class each). */
export const ERROR_CODES = [
  'usage', 'bad_input', 'bad_setting', 'not_found', 'conflict', 'refused', 'unavailable', 'failed',
] as const;

export type SvcErrorCode = (typeof ERROR_CODES)[number];

/**
 * The base of every typed error in svc; `code` is what callers and tests look at, never `message`. The wire's errors
 * (HttpError, ControlApiError) keep their own codes; the CLI turns a ControlApiError into one of these.
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

/** The error class of one code: `new UsageError(message)` carries the code `usage`. */
function withCode<C extends SvcErrorCode>(code: C) {
  return class extends SvcError<C> {
    constructor(message: string, options?: ErrorOptions) {
      super(code, message, options);
    }
  };
}

/** The command line itself is wrong (unknown flag, missing argument); the CLI prints the message. */
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
 * svc could not set a run up around its agent: the sandbox did not start, the gate died, the checkout could not be
 * made. `beforeAgent`: the agent never ran in this attempt, so nothing was written and nothing spent (the one case a
 * worker retries by itself, src/engine/worker.ts).
 */
export class InfraError extends FailedError {
  readonly beforeAgent: boolean;
  constructor(message: string, options: ErrorOptions & { beforeAgent: boolean }) {
    super(message, options);
    this.beforeAgent = options.beforeAgent;
  }
}

/** What a caught value says, for a log line or a message: an Error's message, else its string form. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
