#!/usr/bin/env node
// `npm run bench [-- --quick] [-- --only=runs,ingest,sse,startup,trigger,peer,worked,sandbox,gate,dispatch]
// [-- --runs=N]`: see docs/bench.md.
// The harness is TypeScript run directly by Node's type stripping (Node >= 22.18 / 23.6, as pinned here).
process.removeAllListeners('warning');
const { main } = await import('./bench/main.ts');
process.exitCode = await main(process.argv.slice(2));
