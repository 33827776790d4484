// @ts-check
// The run statuses of DESIGN §3 as the UI knows them: the one list in static/ (the server's is src/run-json.ts).

/** Every status, in the order a run can pass through them. */
export const RUN_STATUSES = /** @type {const} */ ([
  'queued', 'running', 'blocked', 'stopping', 'succeeded', 'failed', 'stopped',
]);

/** The statuses a run ends in. */
export const TERMINAL = new Set(['succeeded', 'failed', 'stopped']);
