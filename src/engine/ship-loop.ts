// A worker ships its run while it works: after a change, and at least every 2 s so control requests (stop, answer)
// reach a blocked run; a Control Plane that does not answer is retried with backoff up to 30 s. On close, a final
// flush gets a few quick tries, then leaves a marker: the next svc command in the project that reaches a Control
// Plane sends the run (ship-pending.ts), or `svc ship` by hand.
import type { Shipper } from './shipper.ts';
import { clearPending, markPending } from './ship-pending.ts';

export interface ShipLoop {
  /** Something of the run changed: ship it soon. */
  changed(): void;
  close(): Promise<void>;
}

export function createShipLoop(shipper: Shipper, dir: string, say: (text: string) => void): ShipLoop {
  let dirty = true;
  let backoff = 250;
  let nextShipAt = 0;
  let shipping: Promise<unknown> = Promise.resolve();
  let closed = false;

  function tick(): void {
    if (closed) return;
    const now = Date.now();
    if ((dirty || now - nextShipAt > 2_000) && now >= nextShipAt) {
      dirty = false;
      shipping = shipper.flush().then((ok) => {
        backoff = ok ? 250 : Math.min(backoff * 2, 30_000);
        nextShipAt = Date.now() + (ok ? 200 : backoff);
        if (!ok) dirty = true;
      });
    }
  }
  const timer = setInterval(() => void shipping.then(tick), 200);
  timer.unref();

  return {
    changed() {
      dirty = true;
    },
    async close() {
      closed = true;
      clearInterval(timer);
      await shipping;
      for (const wait of [0, 250, 1_000]) {
        if (wait) await new Promise((r) => setTimeout(r, wait));
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
