// Once-only shutdown on SIGINT/SIGTERM for the servers' main.ts files (STYLE: Processes); nothing else installs it.
import type { Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';

/**
 * Resolves with the exit code after the first SIGINT or SIGTERM: 0 once `stop` has finished, 1 (logged) if it failed.
 * The handlers are `once`, so a second Ctrl-C while stopping takes Node's default and ends the process at once.
 */
export function exitCodeAfterSignal(log: Logger, message: string, stop: () => Promise<void>): Promise<number> {
  return new Promise<number>((resolve) => {
    let stopping = false;
    const onSignal = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      log.info(message, { signal });
      stop().then(
        () => resolve(0),
        (err: unknown) => {
          log.error('shutdown failed', { error: errorMessage(err) });
          resolve(1);
        },
      );
    };
    process.once('SIGINT', () => onSignal('SIGINT'));
    process.once('SIGTERM', () => onSignal('SIGTERM'));
  });
}
