// The HttpError code a call throws, so unit tests assert codes (STYLE habit 3) rather than messages.
import { HttpError } from '../../src/http/http-error.ts';

/** The code of the HttpError `fn` throws, or null when it returns; any other error is rethrown. */
export function codeOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    if (err instanceof HttpError) return err.code;
    throw err;
  }
}
