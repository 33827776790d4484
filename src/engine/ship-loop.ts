// A worker ships its run while it works: within 200 ms of a change, and every 2 s without one, so control requests
// (stop, answer) reach a blocked run; a Control Plane that does not answer is retried with backoff up to 30 s. On
// close, a final flush gets a few quick tries, then leaves a marker: the next svc command in the project that reaches
// a Control Plane sends the run (ship-pending.ts), or `svc ship` by hand.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Shipper } from './shipper.ts';
import { clearPending, markPending } from './ship-pending.ts';

export interface ShipLoop {
  /** Something of the run changed: ship it soon. */
  changed(): void;
  close(): Promise<void>;
}

export function createShipLoop(shipper: Shipper, dir: string, say: (text: string) => void): ShipLoop {
  let dirty = true;
  /** A flush is running or backing off: the next one is already timed. Otherwise, while dirty, one is due in 200 ms. */
  let held = false;
  let backoff = 0;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let shipping: Promise<unknown> = Promise.resolve();

  function shipIn(ms: number): void {
    clearTimeout(timer);
    timer = setTimeout(() => {
      dirty = false;
      held = true;
      shipping = shipper.flush().then((ok) => {
        held = !ok;
        backoff = ok ? 0 : Math.min(Math.max(backoff * 2, 250), 30_000);
        if (!closed) shipIn(backoff || (dirty ? 200 : 2_000));
      });
    }, ms).unref();
  }
  shipIn(200);

  return {
    changed() {
      if (dirty || closed) return;
      dirty = true;
      if (!held) shipIn(200);
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await shipping;
      for (const wait of [0, 250, 1_000]) {
        if (wait) await sleep(wait);
        if (await shipper.flush()) {
          clearPending(dir);
          return;
        }
      }
      markPending(dir);
      const why = shipper.failure() ?? `no Control Plane answered at ${shipper.url}`;
      say(`not shipped: ${why}; the next svc command in this project that reaches one sends this run ` +
        '(or run `svc ship`)');
    },
  };
}
