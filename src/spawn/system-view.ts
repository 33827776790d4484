// The system part of every sandbox view (DESIGN §7a): the folders programs are installed in, read-only, and of /etc
// only the entries programs need to run, resolve names and trust certificates. Everything else of the host (/home,
// /root, /var, /run, /srv, /opt, /etc's credentials and service configuration) is simply not there.
import { existsSync, lstatSync, openSync, readlinkSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** Folders that hold programs and libraries (symbolic links in a merged-/usr system). */
export const SYSTEM_FOLDERS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * /etc entries a program may need to run, resolve names and trust certificates (docs/engine.md "The agent sandbox"
 * names what is left out: shadow, sudoers, ssh, npmrc and pip.conf, which can hold registry tokens, …).
 */
const ETC_ENTRIES = [
  'passwd', 'group', 'hosts', 'hostname', 'host.conf', 'nsswitch.conf', 'resolv.conf', 'gai.conf', 'networks',
  'protocols', 'services', 'ssl/certs', 'ca-certificates', 'ca-certificates.conf', 'pki/tls/certs', 'pki/ca-trust',
  'crypto-policies', 'alternatives', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'localtime', 'timezone',
  'os-release', 'debian_version', 'lsb-release', 'locale.alias', 'locale.conf', 'mime.types', 'magic', 'magic.mime',
  'inputrc', 'terminfo', 'gitconfig', 'shells', 'bash.bashrc', 'profile', 'xattr.conf', 'java-17-openjdk',
  'python3', 'fonts', 'mtab',
];

/** What is at `path`; `follow`: through links (only where the link is not an agent's to plant). */
export function pathKind(path: string, follow = false): 'dir' | 'file' | 'link' | 'other' | null {
  try {
    const st = follow ? statSync(path) : lstatSync(path);
    return st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other';
  } catch {
    return null;
  }
}

function linksIntoView(link: string): boolean {
  const target = resolve(dirname(link), readlinkSync(link));
  return target.startsWith('/proc/') || isSystemPath(target);
}

/** Where the /etc files copied in start among the descriptors bwrap gets: right after the system-call filter's 3. */
const ETC_FD = 4;

let cached: string[] | null = null;
const etcFiles: string[] = [];

/** Fresh descriptors of the /etc files systemView copies in, in its order, for fd 4 on (bwrap-argv.ts). */
export function openEtcFiles(): number[] {
  systemView();
  return etcFiles.map((path) => openSync(existsSync(path) ? path : '/dev/null', 'r'));
}

/** bwrap arguments that make the system view; read from the host once per process. */
export function systemView(): string[] {
  if (cached) return cached;
  const argv: string[] = [];
  for (const folder of SYSTEM_FOLDERS) {
    const kind = pathKind(folder);
    if (kind === 'link') argv.push('--symlink', readlinkSync(folder), folder);
    else if (kind === 'dir') argv.push('--ro-bind', folder, folder);
  }
  for (const entry of ETC_ENTRIES) {
    const path = `/etc/${entry}`;
    const kind = pathKind(path);
    // A link into the view (/etc/mtab → /proc, /etc/localtime → /usr/share) stays a link; one out of it
    // (resolv.conf → /run/…) is shown as the file it names, since its target folder is not in the view.
    if (kind === 'link' && linksIntoView(path)) argv.push('--symlink', readlinkSync(path), path);
    // A file is copied in (read-only once bwrap remounts the root): every bind costs bwrap a pass over its mount
    // table (~0.17 ms each here), a copy does not.
    else if (pathKind(path, true) === 'file') argv.push('--file', String(ETC_FD + etcFiles.push(path) - 1), path);
    else if (kind) argv.push('--ro-bind', path, path);
  }
  cached = argv;
  return argv;
}

/** True for a path the system view already shows (no need to bind it again). */
export function isSystemPath(path: string): boolean {
  return SYSTEM_FOLDERS.some((f) => path === f || path.startsWith(`${f}/`));
}

/** True for a path under one of the /etc entries the system view shows. */
export function isEtcShown(path: string): boolean {
  return ETC_ENTRIES.some((e) => path === `/etc/${e}` || path.startsWith(`/etc/${e}/`));
}
