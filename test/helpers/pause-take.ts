// Preloaded (node --import) into a svc command racing another to take a run: the test's barrier, nothing of svc
// changed. Its first write of a state.json (the take's record of itself) says "at-take" and waits for "go" on stdin,
// then says "took" and holds the run, alive, until "exit".
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

const rename = fs.renameSync;
let paused = false;

function say(word: string): void {
  fs.writeSync(1, `${word}\n`);
}

/** Blocks (the command must not go on meanwhile) until a line `word` comes on stdin. */
function waitFor(word: string): void {
  let text = '';
  const buf = Buffer.alloc(64);
  while (!text.split('\n').includes(word)) {
    const n = fs.readSync(0, buf, 0, buf.length, null);
    if (n === 0) process.exit(3);
    text += buf.subarray(0, n).toString('utf8');
  }
}

fs.renameSync = (from: fs.PathLike, to: fs.PathLike): void => {
  if (paused || !String(to).endsWith('/state.json')) return rename(from, to);
  paused = true;
  say('at-take');
  waitFor('go');
  rename(from, to);
  say('took');
  waitFor('exit');
  process.exit(0);
};
syncBuiltinESMExports();
