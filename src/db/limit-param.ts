// A bound LIMIT that does not recompile its statement on every run.
//
// SQLite 3.50's planner reads a bare `LIMIT ?` bound value (sqlite3ExprIsInteger with a Parse) and marks the
// parameter so that binding it again expires the statement; node:sqlite binds every parameter on every call, so a
// statement with `LIMIT ?` was parsed and planned again on each step: ~10 µs of a ~35 µs runs-list page, measured in
// a bare process (perf showed sqlite3Reprepare under sqlite3_step). Behind a CAST the planner doesn't look at the
// value, so the prepared plan is reused; the plans themselves are unchanged (the EXPLAIN tests in
// test/unit/runs-store.test.ts). test/unit/limit-param.test.ts keeps a bare `LIMIT ?` out of src/.
export const LIMIT_PARAM = 'LIMIT CAST(? AS INTEGER)';
