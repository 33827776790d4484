// Minimal deterministic ustar writer (POSIX.1-1988 "ustar" headers) so `npm run bundle` needs no system tar.
// Only regular files and directories; fixed mtime and owner so the same tree gives the same bytes.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const BLOCK = 512;

function octal(value, width) {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function splitName(name) {
  if (Buffer.byteLength(name) <= 100) return { name, prefix: '' };
  // ustar stores long paths as prefix (≤155) + "/" + name (≤100), split at a slash.
  for (let i = name.lastIndexOf('/'); i > 0; i = name.lastIndexOf('/', i - 1)) {
    const prefix = name.slice(0, i);
    const rest = name.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(rest) <= 100) return { name: rest, prefix };
  }
  throw new Error(`Path too long for ustar: ${name}`);
}

function header(path, { size, mode, type, mtime }) {
  const buf = Buffer.alloc(BLOCK, 0);
  const { name, prefix } = splitName(path);
  buf.write(name, 0, 100, 'utf8');
  buf.write(octal(mode, 8), 100, 8, 'ascii');
  buf.write(octal(0, 8), 108, 8, 'ascii');
  buf.write(octal(0, 8), 116, 8, 'ascii');
  buf.write(octal(size, 12), 124, 12, 'ascii');
  buf.write(octal(mtime, 12), 136, 12, 'ascii');
  buf.fill(' ', 148, 156);
  buf.write(type, 156, 1, 'ascii');
  buf.write('ustar\0', 257, 6, 'ascii');
  buf.write('00', 263, 2, 'ascii');
  buf.write('root', 265, 32, 'ascii');
  buf.write('root', 297, 32, 'ascii');
  buf.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of buf) sum += byte;
  buf.write(octal(sum, 7) + ' ', 148, 8, 'ascii');
  return buf;
}

function walk(root, rel, out) {
  const full = join(root, rel);
  const st = statSync(full);
  if (st.isDirectory()) {
    out.push({ path: `${rel}/`, dir: true, mode: 0o755 });
    for (const name of readdirSync(full).sort()) walk(root, `${rel}/${name}`, out);
  } else if (st.isFile()) {
    out.push({ path: rel, dir: false, mode: st.mode & 0o111 ? 0o755 : 0o644, full });
  }
}

/** Gzipped tar of `root/<top>` with entries named `<top>/…`. */
export function tarGz(root, top, mtime = 0) {
  const entries = [];
  walk(root, top, entries);
  const parts = [];
  for (const e of entries) {
    if (e.dir) {
      parts.push(header(e.path, { size: 0, mode: e.mode, type: '5', mtime }));
      continue;
    }
    const data = readFileSync(e.full);
    parts.push(header(e.path, { size: data.length, mode: e.mode, type: '0', mtime }), data);
    const pad = (BLOCK - (data.length % BLOCK)) % BLOCK;
    if (pad) parts.push(Buffer.alloc(pad, 0));
  }
  parts.push(Buffer.alloc(BLOCK * 2, 0));
  return gzipSync(Buffer.concat(parts), { level: 9 });
}
