// The one table from error codes (src/errors.ts) to exit statuses: 2 when the person must change what they typed or
// set (the command line, its input, a setting; the spec's tokenless bind is one), 1 for everything else that failed.
import { isSvcError, type SvcErrorCode } from '../errors.ts';

export const EXIT_STATUS: Readonly<Record<SvcErrorCode, 1 | 2>> = {
  usage: 2,
  bad_input: 2,
  bad_setting: 2,
  not_found: 1,
  conflict: 1,
  refused: 1,
  unavailable: 1,
  failed: 1,
};

/** The exit status for an error that ended a command: from its code when it is one of ours, else 1. */
export function exitStatusOf(err: unknown): 1 | 2 {
  return isSvcError(err) ? EXIT_STATUS[err.code] : 1;
}
