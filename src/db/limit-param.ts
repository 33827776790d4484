// A bound LIMIT that does not recompile its statement on every run: SQLite re-plans a bare `LIMIT ?` each time
// node:sqlite binds it, and a CAST hides the value from the planner (docs/bench.md; test/unit/limit-param.test.ts).
export const LIMIT_PARAM = 'LIMIT CAST(? AS INTEGER)';
